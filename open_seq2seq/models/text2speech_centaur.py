"""Text2SpeechCentaur: OpenSeq2Seq's name of the speech-synthesis model that runs Centaur."""

from __future__ import annotations

from open_seq2seq.models.text2speech import Text2Speech


class Text2SpeechCentaur(Text2Speech):
  """Speech synthesis with Centaur (``CentaurEncoder`` + ``CentaurDecoder``).

  Everything is :class:`~open_seq2seq.models.text2speech.Text2Speech`'s: the decoder returns
  the same outputs as Tacotron 2's (one attention block's weights as the ``alignments``, see
  ``decoders/centaur_decoder.py``), so eval reports the same alignment metrics, samples show
  the same pictures and infer writes the same WAV + alignment PNG per line; the loss gets the
  decoder's reduction factor. OpenSeq2Seq needed a separate class only because its
  Centaur decoder returned its outputs in another layout.
  """
