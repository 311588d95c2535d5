"""What a data layer provides to the model: small frozen descriptions, one per family.

A data layer reads its vocabularies and files when it is built and then describes what it
provides (vocabulary sizes, id -> symbol maps, feature counts) in one of these dataclasses.
The model reads the description and hands sizes to its components (``vocab_size=`` ...):
components never look at the data layer, and the data layer never writes derived values
into its ``params``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping


@dataclasses.dataclass(frozen=True)
class DataDescription:
  """Base of every family's description (a family with nothing to publish uses it as is)."""


@dataclasses.dataclass(frozen=True)
class TextDescription(DataDescription):
  """A parallel text corpus: source and target vocabularies and how tokens are joined.

  Attributes:
    src_vocab_size, tgt_vocab_size: vocabulary sizes, special tokens (and padding to a
      multiple of eight) included.
    source_seq2idx, target_seq2idx: token -> id.
    source_idx2seq, target_idx2seq: id -> token.
    delimiter: token separator of the text files (" ": whitespace; "": characters).
  """

  src_vocab_size: int
  tgt_vocab_size: int
  source_seq2idx: Mapping[str, int]
  target_seq2idx: Mapping[str, int]
  source_idx2seq: Mapping[int, str]
  target_idx2seq: Mapping[int, str]
  delimiter: str = " "


@dataclasses.dataclass(frozen=True)
class SpeechDescription(DataDescription):
  """Audio features in, CTC target symbols out.

  Attributes:
    num_audio_features: features per frame.
    tgt_vocab_size: target symbols plus the CTC blank (the last class).
    idx2char, char2idx: the target alphabet (characters or SentencePiece pieces).
    start_id, end_id: ids of ``<S>``/``</S>`` when targets are autoregressive (they end with
      ``</S>``), else None (a SentencePiece model's own ``<S>``/``</S>`` pieces, which no
      transcript encodes to, do not make targets autoregressive).
  """

  num_audio_features: int
  tgt_vocab_size: int
  idx2char: Mapping[int, str]
  char2idx: Mapping[str, int]
  start_id: int | None = None
  end_id: int | None = None


@dataclasses.dataclass(frozen=True)
class ImageDescription(DataDescription):
  """Images in, one class label out.

  Attributes:
    image_size: height and width of the (square) images the layer yields.
    num_channels: channels per pixel (3: RGB).
    num_classes: number of classes; labels are ids in ``[0, num_classes)``.
    class_names: name of each class id (None: unknown, ids are printed instead).
  """

  image_size: int
  num_channels: int
  num_classes: int
  class_names: tuple[str, ...] | None = None

  def class_name(self, label: int) -> str:
    """The name of class ``label`` (its id as text when names are unknown)."""
    if self.class_names is not None and 0 <= label < len(self.class_names):
      return self.class_names[label]
    return str(label)


@dataclasses.dataclass(frozen=True)
class LMDescription(DataDescription):
  """Word ids in; the next words (language modelling) or one class per text out.

  Attributes:
    vocab_size: words in the vocabulary (``<unk>`` and ``<eos>`` included).
    idx2word: the word of each id.
    end_token: id of ``<eos>`` (end of a line; generation stops there).
    unk_token: id of ``<unk>`` (words outside the vocabulary).
    delimiter: what joins words when ids are printed.
    num_classes: None for a language model; the number of classes of a text classifier.
    class_names: name of each class id (None: ids are printed).
    stream_batches: row ``b`` of each training batch continues row ``b`` of the previous
      batch in the token stream, so a recurrent state may be carried from batch to batch
      (truncated back-propagation through time).
  """

  vocab_size: int
  idx2word: tuple[str, ...]
  end_token: int
  unk_token: int
  delimiter: str = " "
  num_classes: int | None = None
  class_names: tuple[str, ...] | None = None
  stream_batches: bool = False

  def class_name(self, label: int) -> str:
    """The name of class ``label`` (its id as text when names are unknown)."""
    if self.class_names is not None and 0 <= label < len(self.class_names):
      return self.class_names[label]
    return str(label)


@dataclasses.dataclass(frozen=True)
class Text2SpeechDescription(DataDescription):
  """Symbol ids in, spectrogram frames out.

  Attributes:
    src_vocab_size: input symbols (``<p>``, ``<s>``, ``</s>``, characters, phonemes).
    idx2symbol: the symbol of each id.
    features: a :class:`~open_seq2seq.data.text2speech.features.SpectrogramFeatures`: the
      frame layout (mel / magnitude counts) and how frames turn back into audio.
  """

  src_vocab_size: int
  idx2symbol: tuple[str, ...]
  features: Any


@dataclasses.dataclass(frozen=True)
class FastPitchDescription(Text2SpeechDescription):
  """Text2Speech's description plus the pitch statistics of the corpus (FastPitch).

  The data layer gives each mel frame its pitch as ``(f0 - pitch_mean) / pitch_std`` on
  voiced frames and 0 on unvoiced and padded ones; the model needs the statistics to shift
  pitch in Hz at inference and to report it.

  Attributes:
    pitch_mean, pitch_std: mean and standard deviation (Hz) of the voiced frames' pitch.
  """

  pitch_mean: float
  pitch_std: float


@dataclasses.dataclass(frozen=True)
class WavenetDescription(DataDescription):
  """Mel frames and mu-law sample ids in, sample ids out (a WaveNet vocoder).

  Attributes:
    num_audio_features: mel channels of a conditioning frame.
    quantization_channels: mu-law bins of a sample id.
    hop_length: samples per frame: frame i conditions samples i*hop .. (i+1)*hop - 1.
    sample_rate: samples per second.
  """

  num_audio_features: int
  quantization_channels: int
  hop_length: int
  sample_rate: int


@dataclasses.dataclass(frozen=True)
class VocoderDescription(DataDescription):
  """Mel frames in, waveform samples out (a GAN vocoder such as HiFi-GAN).

  Attributes:
    features: the :class:`~open_seq2seq.data.text2speech.features.SpectrogramFeatures` of
      the input frames (those of a Tacotron data layer with the same audio keys): mel
      count, hop length (samples per frame: frame i becomes samples
      ``i * hop .. (i + 1) * hop - 1``) and sample rate.
  """

  features: Any
