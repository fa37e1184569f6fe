"""METL-style transformer encoder: relative position attention bias, multi-task regression head.

METL (Gelman et al., 2024) uses relative position embeddings so that what a layer learns about
neighbouring residues does not depend on where in the sequence they are. Here each head learns
a scalar bias per clipped relative distance (Shaw et al. 2018's idea in the scalar form of T5),
added to the attention logits. Proteins of different lengths (METL-Global) share one model: a
batch is as long as its longest sequence, and the positions past a shorter one's end are masked
out of attention and of the pooled representation.
"""

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from .data import Proteins
from .sequence import AMINO_ACIDS


@dataclass(frozen=True)
class ModelConfig:
    proteins: Proteins   # the wild types; position tables are as long as the longest
    n_outputs: int
    d_model: int = 32
    n_layers: int = 2
    n_heads: int = 2
    max_relative_distance: int = 32
    dropout: float = 0.1
    absolute_positions: bool = True


def new_head(width: int, n_outputs: int) -> nn.Linear:
    """A head that starts by predicting zero, the mean of the z-scored targets: training then
    starts at the mean predictor's loss instead of far above it."""
    head = nn.Linear(width, n_outputs)
    nn.init.zeros_(head.weight)
    nn.init.zeros_(head.bias)
    return head


class RelativeSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.d_model % cfg.n_heads:
            raise ValueError(f"d_model {cfg.d_model} is not divisible by n_heads {cfg.n_heads}")
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        # Dropout after the projection, not on the attention weights: dropping entries of the
        # length x length matrix costs more than the attention itself on a CPU.
        self.proj = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_model), nn.Dropout(cfg.dropout))
        self.relative_bias = nn.Parameter(torch.zeros(cfg.n_heads, 2 * cfg.max_relative_distance + 1))
        positions = torch.arange(int(cfg.proteins.lengths.max()))
        distance = (positions[None, :] - positions[:, None]).clamp(-cfg.max_relative_distance, cfg.max_relative_distance)
        self.register_buffer("bias_index", distance + cfg.max_relative_distance, persistent=False)

    def forward(self, x: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.n_heads, width // self.n_heads).permute(2, 0, 3, 1, 4)
        bias = self.relative_bias[:, self.bias_index[:length, :length]].to(q.dtype)  # heads x length x length
        if keep is not None:  # batch x length: no attention to the padding past a sequence's end
            bias = bias.masked_fill(~keep[:, None, None, :], float("-inf"))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return self.proj(y.transpose(1, 2).reshape(batch, length, width))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.attention = RelativeSelfAttention(cfg)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(), nn.Linear(4 * cfg.d_model, cfg.d_model), nn.Dropout(cfg.dropout)
        )

    def forward(self, x: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
        x = x + self.attention(self.norm1(x), keep)
        return x + self.mlp(self.norm2(x))


class ProteinRegressor(nn.Module):
    """Sequences of residue ids, and which protein each mutates -> one value per output (score
    term, or the experimental score)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(len(AMINO_ACIDS), cfg.d_model)
        # Random like the token embedding: a zero start makes every site look alike until the
        # optimizer has moved each position vector by O(1), hundreds of steps at these learning
        # rates, and substitution effects are all about which site is mutated.
        longest = int(cfg.proteins.lengths.max())
        self.position = nn.Parameter(torch.randn(longest, cfg.d_model)) if cfg.absolute_positions else None
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = new_head(cfg.d_model, cfg.n_outputs)
        self.register_buffer("wild_types", torch.from_numpy(cfg.proteins.tokens), persistent=False)
        self.register_buffer("lengths", torch.from_numpy(cfg.proteins.lengths), persistent=False)

    def encode(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[1]
        x = self.embed(tokens)
        if self.position is not None:
            x = x + self.position[:length]
        # A mask only where a sequence is shorter than the batch: one protein's batches (every
        # batch of a METL-Local run) need none.
        keep = None if bool((lengths == length).all()) else torch.arange(length, device=tokens.device) < lengths[:, None]
        for block in self.blocks:
            x = block(x, keep)
        x = self.norm(x)
        return (x if keep is None else x * keep[..., None]).sum(dim=1)

    def forward(self, tokens: torch.Tensor, protein: torch.Tensor) -> torch.Tensor:
        # Scores are changes from the wild type (as Rosetta's are differences to the wild-type
        # structure), so the head sees the variant's representation minus its wild type's:
        # a variant differs in a handful of the 238 positions, and without the difference
        # that signal drowns in what every sequence shares.
        # Only the batch's own wild types: METL-Global has 148 proteins and batches of 128.
        present, which = torch.unique(protein, return_inverse=True)
        lengths = self.lengths[present]
        wild_types = self.encode(self.wild_types[present, : int(lengths.max())], lengths)
        return self.head(self.encode(tokens, self.lengths[protein]) - wild_types[which])

    def replace_head(self, n_outputs: int, dropout: float = 0.0) -> None:
        """Fine-tuning keeps the pretrained encoder and starts a fresh linear head after dropout
        on the backbone's output (METL: 0.5)."""
        self.head = nn.Sequential(nn.Dropout(dropout), new_head(self.cfg.d_model, n_outputs))
