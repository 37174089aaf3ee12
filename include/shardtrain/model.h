// shardtrain's public interface: a model of your own (docs/custom-models.md).
//   shardtrain::nn::register_model, ModelDefinition, ModelContext   (model_registry.h)
//   shardtrain::nn::Layer, Block, add_sequential_block              (layer.h, block.h)
//   the library's layers: Linear, Conv2d, MaxPool2d, ReLU, GELU, LayerNorm, RmsNorm, Embedding
//   shardtrain::nn::check_gradients                                 (gradient_check.h)
//   shardtrain::ops::*: the ops a layer computes with, on the CPU or a GPU (kernels/ops.h)
//   shardtrain::Tensor, Shape, Error, ST_CHECK                      (tensor.h, error.h)
// Stable within a minor version (docs/install.md).
#pragma once

#include "kernels/ops.h"
#include "runtime/core/error.h"
#include "runtime/core/tensor.h"
#include "runtime/nn/activation.h"
#include "runtime/nn/block.h"
#include "runtime/nn/conv2d.h"
#include "runtime/nn/embedding.h"
#include "runtime/nn/gradient_check.h"
#include "runtime/nn/layer.h"
#include "runtime/nn/layernorm.h"
#include "runtime/nn/linear.h"
#include "runtime/nn/maxpool2d.h"
#include "runtime/nn/model_registry.h"
#include "runtime/nn/rmsnorm.h"
