"""ResNet building blocks (v1 and v2, basic and bottleneck)."""

from open_seq2seq.parts.resnet.blocks import FixedPaddingConv2D, ResNetBlock, ResNetStage

__all__ = ["FixedPaddingConv2D", "ResNetBlock", "ResNetStage"]
