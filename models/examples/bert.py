"""BERT (bidirectional encoder: word, position and token-type embeddings, post-LayerNorm blocks,
GELU MLP), seeded random weights, no download. Configurations: "base" (110M, the default),
"tiny" (for CPU tests). The output is the last hidden state."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    "base": dict(vocab=30522, ctx=512, dim=768, layers=12, heads=12, inner=3072, batch=8, seq=512),
    "tiny": dict(vocab=512, ctx=64, dim=64, layers=2, heads=4, inner=256, batch=2, seq=32),
}


class Layer(nn.Module):
    def __init__(self, dim, heads, inner):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln1 = nn.LayerNorm(dim, eps=1e-12)
        self.fc = nn.Linear(dim, inner)
        self.out = nn.Linear(inner, dim)
        self.ln2 = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v)
        x = self.ln1(x + self.proj(a.transpose(1, 2).reshape(b, s, d)))
        return self.ln2(x + self.out(F.gelu(self.fc(x))))


class Bert(nn.Module):
    def __init__(self, vocab, ctx, dim, layers, heads, inner, **_):
        super().__init__()
        self.word = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(ctx, dim)
        self.token_type = nn.Embedding(2, dim)
        self.ln = nn.LayerNorm(dim, eps=1e-12)
        self.layers = nn.ModuleList(Layer(dim, heads, inner) for _ in range(layers))
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.ln(self.word(tokens) + self.pos(pos) + self.token_type(torch.zeros_like(tokens)))
        for layer in self.layers:
            x = layer(x)
        return x


def build_model(config="base"):
    torch.manual_seed(0)
    return Bert(**CONFIGS[config])


def example_inputs(config="base"):
    c = CONFIGS[config]
    g = torch.Generator().manual_seed(1)
    return (torch.randint(0, c["vocab"], (c["batch"], c["seq"]), generator=g),)
