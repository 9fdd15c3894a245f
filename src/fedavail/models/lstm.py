"""FAST's Char-LSTM for Shakespeare next-character prediction (the LEAF reference model)."""

import torch
from torch import nn


class CharLSTM(nn.Module):
    """Embedding(vocab, 8) -> 2-layer LSTM(256) -> Linear(256, vocab) on the last position.

    FAST names the model only; these sizes are LEAF's Shakespeare reference model."""

    def __init__(self, vocab_size: int, embedding_dim: int = 8, hidden_size: int = 256, num_layers: int = 2):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_size, num_layers=num_layers, batch_first=True)
        self.head = nn.Linear(hidden_size, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.lstm(self.embedding(tokens))
        return self.head(hidden[:, -1])
