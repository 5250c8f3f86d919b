// Everything framework code needs from libh2core.
#pragma once

#include "h2/buffer.hpp"
#include "h2/device.hpp"
#include "h2/dtype.hpp"
#include "h2/error.hpp"
#include "h2/half.hpp"
#include "h2/log.hpp"
#include "h2/memory.hpp"
#include "h2/op_registry.hpp"
#include "h2/ops.hpp"
#include "h2/runtime.hpp"
#include "h2/stream.hpp"
#include "h2/tensor.hpp"
