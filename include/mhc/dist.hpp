// The tensor-parallel layer (NCCL, one thread per GPU).
#pragma once
#include "mhc/dist/nccl_comm.hpp"
#include "mhc/dist/tp_runner.hpp"
#include "mhc/schedule.hpp"
