"""A small random-weight DeepSeek-V4 from transformers' own config and model classes."""

import torch


def small_config(hidden=256, layers=4):
    from transformers import DeepseekV4Config

    return DeepseekV4Config(
        vocab_size=512, hidden_size=hidden, moe_intermediate_size=128, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=1, head_dim=64, q_lora_rank=128,
        n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, o_groups=2,
        o_lora_rank=64, index_n_heads=2, index_head_dim=32, index_topk=8, sliding_window=32,
        max_position_embeddings=512, num_nextn_predict_layers=0)


def small_model(device, dtype=torch.bfloat16, seed=0, **config):
    from transformers import DeepseekV4ForCausalLM

    torch.manual_seed(seed)
    model = DeepseekV4ForCausalLM._from_config(small_config(**config), dtype=dtype)
    return model.to(device).eval()


def twin(model, dtype):
    """The same weights in another dtype (the float32 twin is the accuracy reference)."""
    from transformers import DeepseekV4ForCausalLM

    other = DeepseekV4ForCausalLM._from_config(model.config, dtype=dtype)
    state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in model.state_dict().items()}
    other.load_state_dict(state)
    return other.to(next(model.parameters()).device).eval()
