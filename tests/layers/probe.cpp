// The layer check's probe (tests/layers): one object that calls a function of the schemes layer.
// Built as a layer twice: declared above the schemes (it links) and declared in the core layer, where
// the call is a wrong-layer reference that the layer check must refuse at link time.
#include "zen/schemes/scheme.hpp"

namespace zen::layer_probe {
size_t scheme_count() { return scheme_names().size(); }
}  // namespace zen::layer_probe
