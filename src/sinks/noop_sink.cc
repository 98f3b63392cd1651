// NoopSink is header-only; this file gives the library a translation unit of its own.
#include "sinks/noop_sink.h"
