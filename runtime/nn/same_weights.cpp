#include "runtime/nn/same_weights.h"

namespace shardtrain::nn {
namespace {

thread_local bool same_weights = false;

}  // namespace

SameWeights::SameWeights(bool same) : previous_(same_weights) { same_weights = same; }
SameWeights::~SameWeights() { same_weights = previous_; }
bool SameWeights::active() { return same_weights; }

}  // namespace shardtrain::nn
