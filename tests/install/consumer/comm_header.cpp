// The public collectives header compiles on its own against an install
// (train_from_library.cpp includes shardtrain/train.h first, and
// examples/custom_model shardtrain/model.h).
#include "shardtrain/comm.h"
