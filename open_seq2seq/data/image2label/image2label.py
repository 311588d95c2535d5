"""OpenSeq2Seq's import path of the image data layers (``...image2label.image2label``).

The layers live in :mod:`~open_seq2seq.data.image2label.imagenet` and
:mod:`~open_seq2seq.data.image2label.cifar`; configs written for OpenSeq2Seq import them
from here.
"""

from open_seq2seq.data.image2label.cifar import CifarDataLayer
from open_seq2seq.data.image2label.imagenet import ImagenetDataLayer

__all__ = ["CifarDataLayer", "ImagenetDataLayer"]
