"""Tiny Hugging Face models without dropout, built alike by the export and
by the reference (tests/cli/hf_models.sh): random weights from a config,
no download."""
import torch
import transformers as tf

V, T = 96, 8


def build(name):
    torch.manual_seed(0)
    common = dict(vocab_size=V, hidden_size=32, intermediate_size=64,
                  num_hidden_layers=2, num_attention_heads=2,
                  max_position_embeddings=64)
    if name == "gemma":  # 1 + w norms, tied embedding, rotary, one kv head
        m = tf.GemmaForCausalLM(tf.GemmaConfig(
            **common, num_key_value_heads=1, head_dim=16, use_cache=False,
            attention_dropout=0.0))
    elif name == "llama":  # rotary, causal mask from the batch, tied here
        m = tf.LlamaForCausalLM(tf.LlamaConfig(
            **common, num_key_value_heads=2, use_cache=False,
            tie_word_embeddings=True))
    elif name == "t5":  # relative position buckets, a tied embedding
        m = tf.T5ForConditionalGeneration(tf.T5Config(
            vocab_size=V, d_model=32, d_kv=16, d_ff=64, num_layers=1,
            num_heads=2, dropout_rate=0.0, use_cache=False,
            decoder_start_token_id=0))
    elif name == "bert":  # an attention mask of ones over the batch
        m = tf.BertForMaskedLM(tf.BertConfig(
            **common, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0))
    elif name == "roberta":  # position ids from cumsum(ids != pad)
        m = tf.RobertaForMaskedLM(tf.RobertaConfig(
            **common, pad_token_id=0, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0))
    elif name == "bloom":  # ALiBi: slopes times positions per head
        m = tf.BloomForCausalLM(tf.BloomConfig(
            vocab_size=V, hidden_size=32, n_layer=2, n_head=2,
            hidden_dropout=0.0, attention_dropout=0.0, use_cache=False))
    elif name == "gpt2-cls":  # each sequence's last token before padding
        m = tf.GPT2ForSequenceClassification(tf.GPT2Config(
            vocab_size=V, n_embd=32, n_layer=2, n_head=2, n_positions=64,
            num_labels=3, pad_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0,
            attn_pdrop=0.0))
    elif name == "llama-cls":
        m = tf.LlamaForSequenceClassification(tf.LlamaConfig(
            **common, num_key_value_heads=2, use_cache=False, num_labels=3,
            pad_token_id=0))
    else:
        raise ValueError(name)
    return m.train()


def reference_dtype(name):
    """The precision the reference runs in: float64, but float32 for BLOOM,
    whose transformers 4 causal mask is torch.full of float64's minimum in
    the default (float32) dtype, which overflows."""
    return torch.float32 if name == "bloom" else torch.float64


class Logits(torch.nn.Module):
    def __init__(s, m):
        super().__init__()
        s.m = m

    def forward(s, x):
        # An encoder-decoder reads the tokens on both sides.
        if isinstance(s.m, tf.T5ForConditionalGeneration):
            return s.m(input_ids=x, decoder_input_ids=x).logits
        # Padding masked as users do, from the ids (an integer program
        # with a float output).
        if isinstance(s.m, tf.RobertaForMaskedLM):
            return s.m(input_ids=x, attention_mask=(x != 0).long()).logits
        return s.m(input_ids=x).logits
