"""Model families."""

from open_seq2seq.models.model import Model
from open_seq2seq.models.text2text import Text2Text

__all__ = ["Model", "Text2Text"]
