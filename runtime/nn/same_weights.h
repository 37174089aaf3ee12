// The trainer's word that a forward sees the parameters of the one before:
// the micro-batches after a step's first, which the update follows only
// after the last. While a SameWeights lives on this thread, a linear layer
// whose products take bf16 operands reuses the bf16 copy of its weight that its
// last forward made (ops::linear_forward's keep_has_weight) instead of
// converting the weight again: once per update, not once per micro-batch.
// A CUDA graph captured inside one holds no weight conversions.
#pragma once

namespace shardtrain::nn {

class SameWeights {
 public:
  explicit SameWeights(bool same = true);
  ~SameWeights();
  SameWeights(const SameWeights&) = delete;
  SameWeights& operator=(const SameWeights&) = delete;
  // Whether the parameters are those of this thread's last forward.
  static bool active();

 private:
  bool previous_;
};

}  // namespace shardtrain::nn
