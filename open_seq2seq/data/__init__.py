"""Data layers."""

from open_seq2seq.data.data_layer import DataLayer
from open_seq2seq.data.image2label.cifar import CifarDataLayer
from open_seq2seq.data.image2label.imagenet import ImagenetDataLayer
from open_seq2seq.data.lm import IMDBDataLayer, SSTDataLayer, WKTDataLayer
from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
from open_seq2seq.data.speech2text.speech_commands import SpeechCommandsDataLayer
from open_seq2seq.data.text2speech.text2speech import Text2SpeechDataLayer
from open_seq2seq.data.text2speech.vocoder import VocoderDataLayer
from open_seq2seq.data.text2speech.wavenet import WavenetDataLayer
from open_seq2seq.data.text2text.text2text import ParallelTextDataLayer

__all__ = ["DataLayer", "ParallelTextDataLayer", "Speech2TextDataLayer", "ImagenetDataLayer",
           "CifarDataLayer", "WKTDataLayer", "IMDBDataLayer", "SSTDataLayer",
           "Text2SpeechDataLayer", "WavenetDataLayer", "SpeechCommandsDataLayer",
           "VocoderDataLayer"]
