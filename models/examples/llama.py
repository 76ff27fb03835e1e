"""A LLaMA-style decoder: RMSNorm, rotary position embedding (rotate-half), SwiGLU MLP, grouped-query
attention, no biases; seeded random weights, no download. Configurations: "1b" (about 1.1B
parameters: 22 layers, hidden 2048, 32 heads, 4 KV heads, inner 5632, as TinyLlama), "7b-4l" (the
7B configuration with 4 of its 32 layers), "tiny" (for CPU tests).

The rotary embedding and the MLP are marked with torch.profiler.record_function("ak::<type>"), so
the farm's profile can name them rotary_embedding and fused_mlp (models/README.md, hints); as in
Hugging Face's LLaMA, the rotary embedding is the module's apply_rotary_pos_emb function and the MLP
a module of three bias-free Linears (here marked ak_fused_mlp = "swiglu"), which is how the verify
step plugs tuned kernels into them (models/plug.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    "1b": dict(vocab=32000, dim=2048, layers=22, heads=32, kv_heads=4, inner=5632, batch=1, seq=2048),
    "7b-4l": dict(vocab=32000, dim=4096, layers=4, heads=32, kv_heads=32, inner=11008, batch=1, seq=2048),
    "tiny": dict(vocab=512, dim=64, layers=2, heads=4, kv_heads=2, inner=172, batch=2, seq=32),
}


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    """q [B, H, S, D], k [B, KV, S, D]; cos and sin [S, D], each the same half twice."""
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x, cos, sin):
        b, s, d = x.shape
        q = self.wq(x).view(b, s, self.heads, self.hd).transpose(1, 2)
        k = self.wk(x).view(b, s, self.kv_heads, self.hd).transpose(1, 2)
        v = self.wv(x).view(b, s, self.kv_heads, self.hd).transpose(1, 2)
        with torch.profiler.record_function("ak::rotary_embedding"):
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads)
        return self.wo(a.transpose(1, 2).reshape(b, s, d))


class MLP(nn.Module):
    ak_fused_mlp = "swiglu"  # down(silu(gate(x)) * up(x)): models/plug.py may run the fused_mlp kernel

    def __init__(self, dim, inner):
        super().__init__()
        self.gate = nn.Linear(dim, inner, bias=False)
        self.up = nn.Linear(dim, inner, bias=False)
        self.down = nn.Linear(inner, dim, bias=False)

    def forward(self, x):
        with torch.profiler.record_function("ak::fused_mlp"):
            return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, dim, heads, kv_heads, inner):
        super().__init__()
        self.n1 = nn.RMSNorm(dim, eps=1e-5)
        self.attn = Attention(dim, heads, kv_heads)
        self.n2 = nn.RMSNorm(dim, eps=1e-5)
        self.mlp = MLP(dim, inner)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.n1(x), cos, sin)
        return x + self.mlp(self.n2(x))


class Llama(nn.Module):
    def __init__(self, vocab, dim, layers, heads, kv_heads, inner, **_):
        super().__init__()
        self.hd = dim // heads
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, kv_heads, inner) for _ in range(layers))
        self.norm = nn.RMSNorm(dim, eps=1e-5)
        self.head = nn.Linear(dim, vocab, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, tokens):
        s = tokens.shape[1]
        inv = 1.0 / (10000.0 ** (torch.arange(0, self.hd, 2, device=tokens.device, dtype=torch.float32) / self.hd))
        ang = torch.outer(torch.arange(s, device=tokens.device, dtype=torch.float32), inv)
        ang = torch.cat((ang, ang), dim=-1)
        dtype = self.embed.weight.dtype
        cos, sin = ang.cos().to(dtype), ang.sin().to(dtype)
        x = self.embed(tokens)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return self.head(self.norm(x))


def build_model(config="1b"):
    torch.manual_seed(0)
    return Llama(**CONFIGS[config])


def example_inputs(config="1b"):
    c = CONFIGS[config]
    g = torch.Generator().manual_seed(1)
    return (torch.randint(0, c["vocab"], (c["batch"], c["seq"]), generator=g),)
