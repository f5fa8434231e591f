/* A C89 program against the installed libferrite (built with pkg-config by
 * tests/capi/consumer_test.sh): lists the devices, loads MODEL on DEVICE ("" = the default),
 * runs INPUT.pb and compares the output with EXPECTED.pb. Exit 0 when every element is within
 * 1e-4 (absolute + relative), 1 otherwise; every failure prints the status's message. */
#include <ferrite/ferrite.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int failed(ferrite_status* s, const char* what) {
  if (!s) return 0;
  fprintf(stderr, "convnet.c: %s: %s (code %d)\n", what, ferrite_status_message(s),
          (int)ferrite_status_code(s));
  ferrite_status_release(s);
  return 1;
}

static int list_devices(void) {
  ferrite_env* env = NULL;
  size_t n = 0, i;
  const char *name, *detail, *def = NULL;
  int usable;
  if (failed(ferrite_env_create(&env), "env")) return 1;
  if (failed(ferrite_env_device_count(env, &n), "device count")) return 1;
  for (i = 0; i < n; ++i) {
    if (failed(ferrite_env_device(env, i, &name, &usable, &detail), "device")) return 1;
    printf("device %s usable=%d\n", name, usable);
  }
  if (failed(ferrite_env_default_device(env, &def, NULL), "default device")) return 1;
  printf("default device %s\n", def);
  ferrite_env_release(env);
  return 0;
}

int main(int argc, char** argv) {
  ferrite_session_options* opts = NULL;
  ferrite_session* session = NULL;
  ferrite_value *input = NULL, *expected = NULL;
  ferrite_value* outputs[1];
  const ferrite_value* inputs[1];
  const char* input_name = NULL;
  const char* device = NULL;
  const float *got, *want;
  size_t got_bytes = 0, want_bytes = 0, i, count = 0;
  double worst = 0;
  int major = 0, minor = 0;

  if (argc != 5) {
    fprintf(stderr, "usage: convnet MODEL INPUT.pb EXPECTED.pb DEVICE\n");
    return 2;
  }
  ferrite_api_version(&major, &minor);
  if (major != FERRITE_API_VERSION_MAJOR) {
    fprintf(stderr, "convnet.c: built for API %d, library is %d.%d\n", FERRITE_API_VERSION_MAJOR,
            major, minor);
    return 1;
  }
  printf("ferrite %s, API %d.%d\n", ferrite_version_string(), major, minor);
  if (list_devices()) return 1;
  if (failed(ferrite_session_options_create(&opts), "options")) return 1;
  if (failed(ferrite_session_options_set_device(opts, argv[4]), "device option")) return 1;
  if (failed(ferrite_session_create(argv[1], opts, &session), "session")) return 1;
  ferrite_session_options_release(opts);
  if (failed(ferrite_session_device(session, &device, NULL), "session device")) return 1;
  printf("running on %s\n", device);
  if (failed(ferrite_value_load_pb(argv[2], &input, &input_name), "input")) return 1;
  if (failed(ferrite_value_load_pb(argv[3], &expected, NULL), "expected output")) return 1;
  inputs[0] = input;
  outputs[0] = NULL;
  if (failed(ferrite_session_run(session, &input_name, inputs, 1, outputs, 1, NULL, NULL), "run"))
    return 1;
  if (failed(ferrite_value_data(outputs[0], (void**)&got, &got_bytes), "output data")) return 1;
  if (failed(ferrite_value_data(expected, (void**)&want, &want_bytes), "expected data")) return 1;
  if (got_bytes != want_bytes) {
    fprintf(stderr, "convnet.c: output has %lu bytes, expected %lu\n", (unsigned long)got_bytes,
            (unsigned long)want_bytes);
    return 1;
  }
  count = got_bytes / sizeof(float);
  for (i = 0; i < count; ++i) {
    double d = fabs((double)got[i] - (double)want[i]);
    if (d > worst) worst = d;
    if (d > 1e-4 + 1e-4 * fabs((double)want[i])) {
      fprintf(stderr, "convnet.c: element %lu is %g, expected %g\n", (unsigned long)i, got[i],
              want[i]);
      return 1;
    }
  }
  printf("C: %lu outputs match (max abs diff %g)\n", (unsigned long)count, worst);
  ferrite_value_release(outputs[0]);
  ferrite_value_release(expected);
  ferrite_value_release(input);
  ferrite_session_release(session);
  return 0;
}
