// Per-ISA clones of hot loops, picked at load time: the library targets the baseline x86-64 ISA,
// and a loop marked with these also gets AVX2 and AVX-512 versions.
//
// The pick is an ifunc resolver that the dynamic loader runs while relocating the library, before
// a ThreadSanitizer runtime has started; instrumented, it crashes there (libferrite.so under
// build-tsan/). TSan builds keep the default clone only.
#pragma once

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FERRITE_NO_TARGET_CLONES 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(FERRITE_NO_TARGET_CLONES) || !defined(__x86_64__)
#define FERRITE_TARGET_CLONES
#else
#define FERRITE_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

// The same for a function template: GCC only (clang 14 does not clone templates).
#if defined(__GNUC__) && !defined(__clang__)
#define FERRITE_TEMPLATE_TARGET_CLONES FERRITE_TARGET_CLONES
#else
#define FERRITE_TEMPLATE_TARGET_CLONES
#endif
