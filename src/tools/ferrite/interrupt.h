// SIGINT / SIGTERM in the `ferrite` CLI: the signals are blocked in every thread and taken by one
// signal thread, which terminates ferrite's child processes (compilers), removes the temporary
// directories ferrite registered (support/cleanup.h), prints `error: interrupted` and exits with
// 128 + the signal number (130 for Ctrl-C, 143 for SIGTERM).
#pragma once

namespace ferrite::cli {

// Call first in main(), before any thread exists: threads inherit the blocked signal mask.
void install_interrupt_handling();

}  // namespace ferrite::cli
