"""Image classification data: ImageNet TFRecords, CIFAR-10 binary files, preprocessing."""

from open_seq2seq.data.image2label.cifar import CifarDataLayer
from open_seq2seq.data.image2label.image_layer import ImageDataLayer
from open_seq2seq.data.image2label.imagenet import ImagenetDataLayer

__all__ = ["CifarDataLayer", "ImageDataLayer", "ImagenetDataLayer"]
