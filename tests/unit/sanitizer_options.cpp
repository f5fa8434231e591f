// Under AddressSanitizer, make a failed huge allocation return null as the real allocator does,
// so that ferrite's "out of memory" paths are tested instead of ASan aborting the process.
extern "C" const char* __asan_default_options() {
  return "allocator_may_return_null=1";
}
