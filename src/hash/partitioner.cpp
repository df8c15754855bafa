// Partitioner is header-only (zen/hash/hash.hpp); this unit checks it compiles standalone.
#include "zen/hash/hash.hpp"
