"""tinyvideo: a LLaVA-1.5-style VLM that llama.cpp runs unchanged (clip_graph_llava + llama).

Vision (mmproj): 32x32 frame -> 8x8 patch conv -> +pos -> pre_ln -> ViT blocks (pre-norm, GELU
tanh, biases) -> post_ln -> mlp projector (mm.0, GELU tanh, mm.2): 16 embeddings per frame.
Text (llama): RMSNorm, RoPE on adjacent pairs (llama.cpp's NORM rope), GQA (query head h reads KV
head h // (n_head / n_head_kv)), SwiGLU, untied output.

Attention is written by hand: the prompt (BOS, the frames and their time markers) is causal and
computed in query blocks that only read the keys up to the block's end (half the work of a full
masked product); the questions packed after it each read the whole prompt and themselves.
"""
import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

import video_data as vd


@dataclass
class Config:
    # vision
    image_size: int = 32
    patch_size: int = 8
    v_embd: int = 128
    v_layers: int = 2
    v_heads: int = 4
    v_ff: int = 512
    # text
    n_vocab: int = 512
    n_embd: int = 256
    n_layers: int = 8
    n_head: int = 4
    n_head_kv: int = 2
    n_ff: int = 512
    rope_base: float = 10000.0
    eps: float = 1e-5
    n_ctx: int = 4608  # llama.context_length written to the GGUF

    @property
    def head_dim(self):
        return self.n_embd // self.n_head

    @property
    def n_patches(self):
        return (self.image_size // self.patch_size) ** 2

    def to_dict(self):
        return asdict(self)


def gelu(x):
    return F.gelu(x, approximate="tanh")


class VitBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c.v_embd
        self.heads = c.v_heads
        self.ln1 = nn.LayerNorm(d, eps=c.eps)
        self.ln2 = nn.LayerNorm(d, eps=c.eps)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.out = nn.Linear(d, d)
        self.up = nn.Linear(d, c.v_ff)
        self.down = nn.Linear(c.v_ff, d)

    def forward(self, x):  # [B, n, d]
        B, n, d = x.shape
        h = self.ln1(x)
        q, k, v = (p(h).view(B, n, self.heads, -1).transpose(1, 2) for p in (self.q, self.k, self.v))
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1) @ v
        x = x + self.out(a.transpose(1, 2).reshape(B, n, d))
        return x + self.down(gelu(self.up(self.ln2(x))))


class Vision(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.patch = nn.Conv2d(3, c.v_embd, c.patch_size, c.patch_size)
        self.pos = nn.Parameter(torch.randn(c.n_patches, c.v_embd) * 0.5)
        self.pre_ln = nn.LayerNorm(c.v_embd, eps=c.eps)
        self.blocks = nn.ModuleList(VitBlock(c) for _ in range(c.v_layers))
        self.post_ln = nn.LayerNorm(c.v_embd, eps=c.eps)
        self.mm0 = nn.Linear(c.v_embd, c.n_embd)
        self.mm2 = nn.Linear(c.n_embd, c.n_embd)

    def forward(self, frames):
        """uint8 [F, H, W, 3] -> (projected [F, n_patches, n_embd], vit features [F, n_patches, v_embd])."""
        x = frames.permute(0, 3, 1, 2).float() / 255.0
        x = ((x - 0.5) / 0.5).half().float()  # llama.cpp's conv takes the pixels as f16
        x = self.patch(x).flatten(2).transpose(1, 2) + self.pos
        x = self.pre_ln(x)
        for b in self.blocks:
            x = b(x)
        feats = self.post_ln(x)
        return self.mm2(gelu(self.mm0(feats))), feats


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(pos, head_dim, base):
    """cos/sin [B, 1, T, head_dim/2] for positions pos [B, T]."""
    inv = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = pos.double()[:, None, :, None] * inv
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope(x, cos, sin):
    """x [B, H, T, D]: rotates adjacent pairs (2i, 2i+1), as llama.cpp's rope type NORM."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


def block_causal_attention(q, k, v, n_prefix, q_mask, block):
    """q [B,H,T,D], k/v [B,H,T,D] (KV heads already repeated). Rows < n_prefix: causal over the
    prefix, in query blocks reading only keys up to the block's end. Rows >= n_prefix: q_mask
    [B, T - n_prefix, T] (True = may attend). The mask is an additive bias fused into the score
    product (baddbmm): 12% less CPU than scale + masked_fill (measured)."""
    B, H, T, D = q.shape
    scale = 1.0 / math.sqrt(D)
    q3, k3, v3 = q.reshape(B * H, T, D), k.reshape(B * H, T, D), v.reshape(B * H, T, D)
    outs = []
    for s in range(0, n_prefix, block):
        e = min(s + block, n_prefix)
        allowed = torch.ones(e - s, e, dtype=torch.bool).tril(diagonal=s)
        bias = torch.zeros(e - s, e).masked_fill_(~allowed, float("-inf"))
        sc = torch.baddbmm(bias.expand(B * H, -1, -1), q3[:, s:e], k3[:, :e].transpose(1, 2), alpha=scale)
        outs.append(torch.bmm(torch.softmax(sc, dim=-1), v3[:, :e]))
    if T > n_prefix:
        bias = torch.zeros(q_mask.shape).masked_fill_(~q_mask, float("-inf"))
        bias = bias[:, None].expand(B, H, -1, -1).reshape(B * H, T - n_prefix, T)
        sc = torch.baddbmm(bias, q3[:, n_prefix:], k3.transpose(1, 2), alpha=scale)
        outs.append(torch.bmm(torch.softmax(sc, dim=-1), v3))
    return torch.cat(outs, dim=1).reshape(B, H, T, D)


class DecoderBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        d, hd = c.n_embd, c.head_dim
        self.attn_norm = RMSNorm(d, c.eps)
        self.wq = nn.Linear(d, c.n_head * hd, bias=False)
        self.wk = nn.Linear(d, c.n_head_kv * hd, bias=False)
        self.wv = nn.Linear(d, c.n_head_kv * hd, bias=False)
        self.wo = nn.Linear(c.n_head * hd, d, bias=False)
        self.ffn_norm = RMSNorm(d, c.eps)
        self.gate = nn.Linear(d, c.n_ff, bias=False)
        self.up = nn.Linear(d, c.n_ff, bias=False)
        self.down = nn.Linear(c.n_ff, d, bias=False)

    def forward(self, x, cos, sin, n_prefix, q_mask, block):
        c = self.c
        B, T, _ = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(B, T, c.n_head, c.head_dim).transpose(1, 2)
        k = self.wk(h).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
        v = self.wv(h).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = c.n_head // c.n_head_kv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        a = block_causal_attention(q, k, v, n_prefix, q_mask, block)
        x = x + self.wo(a.transpose(1, 2).reshape(B, T, -1))
        h = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class TinyVideo(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.vision = Vision(c)
        self.tok_embd = nn.Embedding(c.n_vocab, c.n_embd)
        self.blocks = nn.ModuleList(DecoderBlock(c) for _ in range(c.n_layers))
        self.norm = RMSNorm(c.n_embd, c.eps)
        self.output = nn.Linear(c.n_embd, c.n_vocab, bias=False)
        # training only (not exported): per patch, which shape and colour is in its cell, and which
        # cell it is (where_first / left_of need the cell; nothing else made the projector keep it)
        self.aux_head = nn.Linear(c.n_embd, 1 + 4 * 5)
        self.aux_cell_head = nn.Linear(c.n_embd, 16)
        # training only: from the decoder's last hidden state at each frame's last visual token, what
        # a viewer keeping track knows so far (video_data.STATE_FIELDS: what each question type
        # needs carried to the question) - dense supervision of the state the questions ask about,
        # where the answers alone are one signal per ~40 tokens
        self.aux_state_head = nn.Linear(c.n_embd, vd.N_STATE_LOGITS)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)

    def forward(self, ids, pos, image_embd, n_prefix, q_mask, block=512, return_hidden=False):
        """ids [B, T] (-1 where a visual token goes), pos [B, T], image_embd [B, n_visual, n_embd]."""
        x = self.tok_embd(ids.clamp(min=0))
        is_img = ids < 0
        if image_embd is not None:
            x = x.masked_scatter(is_img[..., None], image_embd.reshape(-1).to(x.dtype))
        cos, sin = rope_tables(pos, self.c.head_dim, self.c.rope_base)
        for b in self.blocks:
            x = b(x, cos, sin, n_prefix, q_mask, block)
        h = self.norm(x)
        return (self.output(h), h) if return_hidden else self.output(h)

    def n_params(self):
        return sum(p.numel() for p in self.parameters())


def load_weights(model, sd):
    """Loads a state dict that may lack training-only heads (aux_*: a checkpoint from before one was
    added, or an imported GGUF pair); anything else missing or unexpected is an error."""
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if unexpected or any(not k.startswith("aux_") for k in missing):
        raise ValueError("weights do not match the model (missing %s, unexpected %s)" % (missing, unexpected))
