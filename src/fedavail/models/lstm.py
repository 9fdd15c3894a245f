"""The FAST authors' Char-LSTM for Shakespeare next-character prediction (models/lstm.py of
github.com/RogerRogerUSC/FAST; LEAF's reference sizes)."""

import torch
from torch import nn


class CharLSTM(nn.Module):
    """Embedding(vocab, 8) -> 2-layer LSTM(256) -> dropout 0.5 -> Linear(256, vocab) on the last position.

    The authors drop out every position and then keep the last; dropping out only the last is the same in
    distribution and skips the masks nothing reads. vocab is the dataset's: LEAF's 80 characters on LEAF's own files
    (exactly the authors' 80-way model), 81 on the Gutenberg-built datasets, which add one for unknown characters."""

    def __init__(self, vocab_size: int, embedding_dim: int = 8, hidden_size: int = 256, num_layers: int = 2,
                 dropout: float = 0.5):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_size, num_layers=num_layers, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(hidden_size, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.lstm(self.embedding(tokens))
        return self.head(self.dropout(hidden[:, -1]))
