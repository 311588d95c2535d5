"""Building blocks of the RNN transducer (Graves, 2012): the prediction and joint networks
and the searches that decode with them (greedy, alignment-length synchronous beam search)."""

from open_seq2seq.parts.transducer.networks import JointNetwork, PredictionNetwork
from open_seq2seq.parts.transducer.search import (alignment_length_synchronous_search,
                                                  greedy_search)

__all__ = ["PredictionNetwork", "JointNetwork", "greedy_search",
           "alignment_length_synchronous_search"]
