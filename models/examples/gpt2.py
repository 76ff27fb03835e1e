"""GPT-2 (decoder-only transformer, learned positions, GELU MLP, pre-LayerNorm), seeded random
weights, no download. Configurations: "small" (124M, the default), "tiny" (for CPU tests)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    "small": dict(vocab=50257, ctx=1024, dim=768, layers=12, heads=12, batch=1, seq=1024),
    "tiny": dict(vocab=512, ctx=64, dim=64, layers=2, heads=4, batch=2, seq=32),
}


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, vocab, ctx, dim, layers, heads, **_):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(ctx, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied, as in GPT-2
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        for blk in self.blocks:
            nn.init.normal_(blk.proj.weight, std=0.02 / math.sqrt(2 * layers))

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


def build_model(config="small"):
    torch.manual_seed(0)
    return GPT2(**CONFIGS[config])


def example_inputs(config="small"):
    c = CONFIGS[config]
    g = torch.Generator().manual_seed(1)
    return (torch.randint(0, c["vocab"], (c["batch"], c["seq"]), generator=g),)
