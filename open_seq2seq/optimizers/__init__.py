"""Optimizers, learning-rate policies, LARC, regularization and variable freezing."""

from open_seq2seq.optimizers import lr_policies
from open_seq2seq.optimizers.larc import LARC_PARAMS, apply_larc
from open_seq2seq.optimizers.lr_policies import (POLICIES, LRPolicySchedule,
                                                 complete_lr_policy_params, cosine_decay,
                                                 exp_decay, fixed_lr, inv_poly_decay,
                                                 piecewise_constant, poly_decay,
                                                 policy_declarations, transformer_policy)
from open_seq2seq.optimizers.novograd import NovoGrad
from open_seq2seq.optimizers.optimizers import (OPTIMIZERS, SUMMARIES, freeze_filter,
                                                get_optimizer, optimizer_declarations,
                                                validate_optimizer_params)
# Regularization lives in utils/ (components use it too); re-exported for the trainer and
# for OpenSeq2Seq-style imports.
from open_seq2seq.utils.regularizers import (REGULARIZERS, is_regularized, make_regularizer,
                                             regularization_loss, regularizer_declarations,
                                             variable_path)

__all__ = ["lr_policies", "LRPolicySchedule", "POLICIES", "complete_lr_policy_params",
           "cosine_decay", "exp_decay", "fixed_lr", "inv_poly_decay", "piecewise_constant",
           "poly_decay", "policy_declarations", "transformer_policy", "OPTIMIZERS",
           "REGULARIZERS", "SUMMARIES", "freeze_filter", "get_optimizer", "is_regularized",
           "make_regularizer", "optimizer_declarations", "regularization_loss",
           "regularizer_declarations", "validate_optimizer_params", "variable_path",
           "NovoGrad", "LARC_PARAMS", "apply_larc"]
