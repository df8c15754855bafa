// The layer check's own translation unit (cmake/ZenLayers.cmake): deliberately empty. A layer
// check is a shared object made of a layer's whole archive, linked with --no-undefined against the
// layers below it; this file only gives CMake a source for that target.
namespace zen::layer_check {}
