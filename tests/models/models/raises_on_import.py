import torch

raise RuntimeError("this model file is broken on purpose")
