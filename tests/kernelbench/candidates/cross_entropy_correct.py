# 5_CrossEntropyLoss: a correct candidate; it indexes with the int64 targets.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, predictions, targets):
        log_probs = predictions - torch.logsumexp(predictions, dim=1, keepdim=True)
        return -log_probs.gather(1, targets.unsqueeze(1)).mean()
