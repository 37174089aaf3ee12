// The residual MLP: a stem (linear + relu to `width`), `blocks` residual
// units (residual_unit.h), one Block each, and a linear head. Registered as
// model "residual_mlp", for configs with
//   [model]
//   kind = "custom"
//   name = "residual_mlp"
//   options = { width = 256, hidden = 512, blocks = 3 }
#pragma once

namespace resmlp {

// Registers the model with the library (nn::register_model): call it once,
// before the config is loaded.
void register_residual_mlp();

}  // namespace resmlp
