"""Model families."""

from open_seq2seq.models.image2label import Image2Label
from open_seq2seq.models.lstm_lm import LSTMLM
from open_seq2seq.models.model import Model
from open_seq2seq.models.speech2text import Speech2Text
from open_seq2seq.models.text2speech import Text2Speech, Text2SpeechTacotron
from open_seq2seq.models.text2speech_centaur import Text2SpeechCentaur
from open_seq2seq.models.text2speech_fastpitch import FastPitch
from open_seq2seq.models.text2speech_wavenet import Text2SpeechWavenet
from open_seq2seq.models.text2text import Text2Text
from open_seq2seq.models.vocoder import HiFiGAN

__all__ = ["Model", "Text2Text", "Speech2Text", "Image2Label", "LSTMLM", "Text2Speech",
           "Text2SpeechTacotron", "Text2SpeechWavenet", "Text2SpeechCentaur", "HiFiGAN",
           "FastPitch"]
