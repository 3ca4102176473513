// The I/O layer: safetensors files and DeepSeek-V4.x checkpoints.
#pragma once
#include "mhc/core.hpp"
#include "mhc/io/checkpoint.hpp"
#include "mhc/io/safetensors.hpp"
