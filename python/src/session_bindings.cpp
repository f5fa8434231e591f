// ferrite._core.Session: a loaded model on a device (runtime/session.h) seen from Python.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <cstdlib>
#include <filesystem>

#include "bindings.h"
#include "distributed/tensor_parallel.h"
#include "frontend/onnx/importer.h"
#include "runtime/session.h"
#include "tensor_interop.h"

namespace ferrite::py {

namespace {

nb::list describe_values(const std::vector<Value*>& values) {
  nb::list out;
  for (const Value* v : values) {
    nb::list dims;
    const Shape& s = v->type.shape;
    if (s.rank_known())
      for (size_t i = 0; i < s.rank(); ++i) dims.append(dim_to_py(s[i]));
    out.append(nb::make_tuple(v->name, std::string(dtype_name(v->type.dtype)),
                              s.rank_known() ? nb::object(dims) : nb::none()));
  }
  return out;
}

nb::dict stats_to_dict(const Session& s) {
  nb::dict d;
  d["compiles"] = s.compiles();
  ModelStats st = s.stats();
  if (st.memory) {
    nb::dict m;
    m["planned_peak_bytes"] = st.memory->planned_peak_bytes;
    m["intermediate_bytes"] = st.memory->intermediate_bytes;
    m["live_peak_bytes"] = st.memory->live_peak_bytes;
    m["planned_buffers"] = st.memory->planned_buffers;
    m["in_place"] = st.memory->in_place;
    m["unplanned_buffers"] = st.memory->unplanned_buffers;
    m["arena_capacity_bytes"] = st.memory->arena_capacity_bytes;
    m["outputs_in_place"] = st.memory->outputs_in_place;
    m["outputs_copied_into_inputs"] = st.memory->outputs_copied_into_inputs;
    m["output_bytes_copied_into_inputs"] = st.memory->output_bytes_copied_into_inputs;
    m["outputs_in_caller_memory"] = st.memory->outputs_in_caller_memory;
    m["output_bytes_copied_to_caller"] = st.memory->output_bytes_copied_to_caller;
    d["memory"] = m;
  }
  if (st.tuning) {
    nb::dict t;
    t["kernels_tuned"] = st.tuning->kernels_tuned;
    t["kernels_reused"] = st.tuning->kernels_reused;
    t["configs_timed"] = st.tuning->configs_timed;
    t["seconds"] = st.tuning->seconds;
    d["tuning"] = t;
  }
  if (st.device_memory) {
    const DeviceMemoryStats& dm = *st.device_memory;
    nb::dict m;
    m["in_use_bytes"] = dm.in_use_bytes;
    m["peak_in_use_bytes"] = dm.peak_in_use_bytes;
    m["reserved_bytes"] = dm.reserved_bytes;
    m["peak_reserved_bytes"] = dm.peak_reserved_bytes;
    m["driver_allocs"] = dm.driver_allocs;
    m["cache_hits"] = dm.cache_hits;
    d["device_memory"] = m;
  }
  return d;
}

// Host arrays as named inputs (names empty: graph-input order). Their storages hold Python
// references: drop the inputs with the GIL held.
std::vector<Session::NamedInput> host_inputs(const std::vector<std::string>& names,
                                             const std::vector<InputArray>& arrays) {
  if (!names.empty() && names.size() != arrays.size())
    throw nb::value_error("names and arrays differ in length");
  std::vector<Session::NamedInput> inputs;
  inputs.reserve(arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    std::string name = names.empty() ? std::string() : names[i];
    std::string what = name.empty() ? "input " + std::to_string(i) : "input '" + name + "'";
    inputs.push_back({name, unwrap(tensor_from_array(arrays[i], what))});
  }
  return inputs;
}

// S: Session or TensorParallelSession (the same run()).
template <class S>
std::vector<nb::object> run_session(S& s, const std::vector<std::string>& names,
                                    const std::vector<InputArray>& arrays,
                                    const std::string& framework) {
  std::vector<Session::NamedInput> inputs = host_inputs(names, arrays);
  Expected<std::vector<Tensor>> out = [&] {
    nb::gil_scoped_release nogil;
    return s.run(inputs);
  }();
  {
    // Input storages hold Python references: drop them with the GIL held.
    inputs.clear();
  }
  std::vector<Tensor> tensors = unwrap(std::move(out));
  // Sequences and optionals have no array form here: refused rather than returned as arrays.
  for (const Tensor& t : tensors)
    if (!t.is_tensor())
      throw nb::value_error(
          ("the model returns " + t.type_string() + "; the Python API returns tensors only")
              .c_str());
  std::vector<nb::object> result;
  result.reserve(tensors.size());
  for (Tensor& t : tensors) result.push_back(array_from_tensor(std::move(t), framework));
  return result;
}

// S::time_resident from Python: device seconds of `runs` runs with the inputs resident on the
// device (the CUDA graph replayed where the device records runs), as a dict of the samples and
// how they were taken.
template <class S>
nb::dict time_resident_session(S& s, const std::vector<std::string>& names,
                               const std::vector<InputArray>& arrays, int runs) {
  if (runs < 1) throw nb::value_error("runs must be at least 1");
  std::vector<Session::NamedInput> inputs = host_inputs(names, arrays);
  Expected<DeviceTiming> t = [&] {
    nb::gil_scoped_release nogil;
    return s.time_resident(inputs, runs);
  }();
  inputs.clear();
  DeviceTiming timing = unwrap(std::move(t));
  nb::dict d;
  d["seconds"] = timing.seconds;
  d["method"] = timing.method;
  return d;
}

std::string session_device(Session& s) {
  return s.device().name();
}
std::string session_device(TensorParallelSession& s) {
  return s.local(0).device().name();
}

// Session::run_device from Python: arrays in the device's memory stay there (host arrays are
// accepted beside them); `alloc(i, dims, dtype_name)` returns the device address of output i
// (the caller keeps that memory); `memory(bytes)`, optional, returns the address of device memory
// the run may use until it returns (DeviceRun::memory); `input_done(i)`, optional, is told when no
// later step reads input i (DeviceRun::input_done); `memory_free(address)`, optional with `memory`,
// takes a block of it back during the run (DeviceRun::memory_free); `stream` is the caller's stream
// handle, which the run is
// ordered with (0 is CUDA's legacy default stream, PyTorch's default current stream); `gpu` the
// GPU the session runs on (its device's unit: `cuda:1` is 1). S: Session, or a
// TensorParallelSession of one rank.
// A CUDA tensor described as `(address, dims, dtype name, GPU)`: what the torch.compile backend
// passes for the (contiguous) tensors of a GPU run. Building that tuple in Python costs a
// fraction of a DLPack export (Tensor.__dlpack__ was a tenth of a ResNet-50 training step's
// host time, for about 1,300 tensors a step). The caller keeps the memory alive.
DeviceArray described_device_array(const nb::tuple& t, const std::string& what) {
  if (t.size() != 4)
    throw nb::value_error((what + ": a device tensor is described by (address, dims, dtype, gpu)")
                              .c_str());
  DeviceArray d;
  d.data = reinterpret_cast<const void*>(nb::cast<uintptr_t>(t[0]));
  d.dims = nb::cast<std::vector<int64_t>>(t[1]);
  std::optional<DType> dtype = dtype_from_name(nb::cast<std::string>(t[2]));
  if (!dtype) throw nb::value_error((what + ": unknown dtype name").c_str());
  d.dtype = *dtype;
  d.device_type = nb::device::cuda::value;
  d.device_id = nb::cast<int>(t[3]);
  for (int64_t x : d.dims)
    if (x < 0) throw nb::value_error((what + ": a negative dim").c_str());
  return d;
}

template <class S>
void run_device_session(S& s, const std::vector<std::string>& names,
                        std::vector<nb::object> arrays, nb::callable alloc, uintptr_t stream,
                        int gpu, std::optional<nb::callable> memory,
                        std::optional<nb::callable> input_done,
                        std::optional<nb::callable> memory_free) {
  if (!names.empty() && names.size() != arrays.size())
    throw nb::value_error("names and arrays differ in length");
  std::vector<Session::NamedInput> inputs;
  DeviceRun run;
  for (size_t i = 0; i < arrays.size(); ++i) {
    std::string name = names.empty() ? std::string() : names[i];
    std::string what = name.empty() ? "input " + std::to_string(i) : "input '" + name + "'";
    DeviceArray d;
    if (nb::isinstance<nb::tuple>(arrays[i])) {
      d = described_device_array(nb::borrow<nb::tuple>(arrays[i]), what);
    } else {
      InputArray a;
      if (!nb::try_cast(arrays[i], a))
        throw nb::type_error((what + ": not an array (DLPack or buffer protocol) nor a device "
                                     "tensor's (address, dims, dtype, gpu)")
                                 .c_str());
      if (a.device_type() == nb::device::cpu::value) {
        inputs.push_back({name, unwrap(tensor_from_array(a, what))});
        run.input_dev.push_back(nullptr);
        continue;
      }
      d = unwrap(device_array(a, what));
    }
    const std::string device = session_device(s);
    if (d.device_type != nb::device::cuda::value || device != "cuda")
      throw nb::value_error((what + ": a tensor on DLPack device type " +
                             std::to_string(d.device_type) + " cannot run on device '" + device +
                             "'")
                                .c_str());
    if (d.device_id != gpu)
      throw nb::value_error((what + ": on GPU " + std::to_string(d.device_id) +
                             ", but the session runs on GPU " + std::to_string(gpu))
                                .c_str());
    // dtype and dims only: the bytes stay on the device (a one-byte stand-in is never read).
    Tensor shape_only =
        unwrap(Tensor::over_storage(d.dtype, d.dims, std::shared_ptr<uint8_t[]>(new uint8_t[1])));
    inputs.push_back({name, std::move(shape_only)});
    run.input_dev.push_back(d.data);
  }
  run.stream = reinterpret_cast<void*>(stream);
  run.caller_stream = true;
  run.output = [&alloc](size_t i, DType dtype,
                        const std::vector<int64_t>& dims) -> Expected<void*> {
    nb::gil_scoped_acquire gil;
    try {
      nb::object r = alloc(i, nb::tuple(nb::cast(dims)), std::string(dtype_name(dtype)));
      return reinterpret_cast<void*>(nb::cast<uintptr_t>(r));
    } catch (nb::python_error& e) {
      return err("output ", i, ": the allocator raised ", e.what());
    } catch (const std::exception& e) {
      return err("output ", i, ": the allocator failed: ", e.what());
    }
  };
  if (memory) {
    run.memory = [&memory](size_t bytes) -> Expected<void*> {
      nb::gil_scoped_acquire gil;
      try {
        return reinterpret_cast<void*>(nb::cast<uintptr_t>((*memory)(bytes)));
      } catch (nb::python_error& e) {
        return err("run memory: the allocator raised ", e.what());
      } catch (const std::exception& e) {
        return err("run memory: the allocator failed: ", e.what());
      }
    };
  }
  if (memory && memory_free) {
    run.memory_free = [&memory_free](void* block) {
      nb::gil_scoped_acquire gil;
      try {
        (*memory_free)(reinterpret_cast<uintptr_t>(block));
      } catch (nb::python_error& e) {
        e.discard_as_unraisable("ferrite run_device memory_free");
      }
    };
  }
  if (input_done) {
    // Our reference to the array goes first, then the caller drops its own.
    run.input_done = [&arrays, &input_done](size_t i) {
      nb::gil_scoped_acquire gil;
      if (i < arrays.size()) arrays[i] = nb::none();
      try {
        (*input_done)(i);
      } catch (nb::python_error& e) {
        e.discard_as_unraisable("ferrite run_device input_done");
      }
    };
  }
  Status st = [&] {
    nb::gil_scoped_release nogil;
    return s.run_device(inputs, run);
  }();
  inputs.clear();  // storages of host inputs hold Python references: dropped with the GIL
  check(st);
}

}  // namespace

RunOptions make_options(const std::string& precision, int threads, bool autotune,
                        const std::optional<std::vector<std::string>>& passes,
                        const std::optional<std::string>& dump_dir) {
  RunOptions o;
  auto p = precision_from_name(precision);
  if (!p)
    throw nb::value_error(
        ("unknown precision '" + precision + "' (f32, tf32, bf16, fp16)").c_str());
  o.precision = *p;
  if (threads < 0) throw nb::value_error("threads must be >= 0 (0: the device's default)");
  o.threads = threads;
  o.autotune = autotune;
  o.passes = passes;
  if (dump_dir) o.dump_dir = std::filesystem::path(*dump_dir);
  return o;
}

// Session's execution contexts (RunOptions::contexts): 0 is the device's default.
int check_contexts(int contexts) {
  if (contexts < 0 || contexts > 1024)
    throw nb::value_error("contexts must be in 0..1024 (0: the device's default)");
  return contexts;
}

std::unique_ptr<Session> session_from_graph(std::unique_ptr<Graph> g, const std::string& device,
                                            const RunOptions& o) {
  Expected<std::unique_ptr<Session>> s = [&] {
    nb::gil_scoped_release nogil;
    return Session::from_graph(std::move(g), device, o);
  }();
  return unwrap(std::move(s));
}

std::unique_ptr<TensorParallelSession> rank_session_from_graph(std::unique_ptr<Graph> g,
                                                               const std::string& device,
                                                               const RunOptions& o,
                                                               const CommunicatorHandle& comm) {
  Expected<std::unique_ptr<TensorParallelSession>> s = [&] {
    nb::gil_scoped_release nogil;
    return TensorParallelSession::for_rank(std::move(g), device, o, comm.c);
  }();
  return unwrap(std::move(s));
}

void bind_session(nb::module_& m) {
  nb::class_<Session>(m, "Session")
      .def_static(
          "load",
          [](const std::string& path, const std::string& device, const std::string& precision,
             int threads, bool autotune, std::optional<std::vector<std::string>> passes,
             std::optional<std::string> dump_dir, int contexts) {
            RunOptions o = make_options(precision, threads, autotune, passes, dump_dir);
            o.contexts = check_contexts(contexts);
            Expected<std::unique_ptr<Session>> s = [&] {
              nb::gil_scoped_release nogil;
              return Session::load(path, device, o);
            }();
            return unwrap(std::move(s));
          },
          nb::arg("path"), nb::arg("device"), nb::arg("precision") = "f32", nb::arg("threads") = 0,
          nb::arg("autotune") = false, nb::arg("passes") = nb::none(),
          nb::arg("dump_dir") = nb::none(), nb::arg("contexts") = 0)
      .def_static(
          "from_bytes",
          [](nb::bytes data, const std::string& base_dir, const std::string& device,
             const std::string& precision, int threads, bool autotune,
             std::optional<std::vector<std::string>> passes, std::optional<std::string> dump_dir,
             int contexts) {
            RunOptions o = make_options(precision, threads, autotune, passes, dump_dir);
            o.contexts = check_contexts(contexts);
            std::string bytes(data.c_str(), data.size());
            Expected<std::unique_ptr<Graph>> g = [&] {
              nb::gil_scoped_release nogil;
              return import_onnx_bytes(bytes, base_dir);
            }();
            return session_from_graph(unwrap(std::move(g)), device, o);
          },
          nb::arg("data"), nb::arg("base_dir"), nb::arg("device"), nb::arg("precision") = "f32",
          nb::arg("threads") = 0, nb::arg("autotune") = false, nb::arg("passes") = nb::none(),
          nb::arg("dump_dir") = nb::none(), nb::arg("contexts") = 0)
      .def("run", &run_session<Session>, nb::arg("names"), nb::arg("arrays"), nb::arg("framework"))
      .def("run_device", &run_device_session<Session>, nb::arg("names"), nb::arg("arrays"),
           nb::arg("alloc"), nb::arg("stream"), nb::arg("gpu") = 0, nb::arg("memory") = nb::none(),
           nb::arg("input_done") = nb::none(), nb::arg("memory_free") = nb::none())
      .def("time_resident", &time_resident_session<Session>, nb::arg("names"), nb::arg("arrays"),
           nb::arg("runs"))
      .def_prop_ro("inputs", [](const Session& s) { return describe_values(s.graph().inputs()); })
      .def_prop_ro("outputs", [](const Session& s) { return describe_values(s.graph().outputs()); })
      .def_prop_ro("device", [](const Session& s) { return s.device().name(); })
      .def_prop_ro("compiles", &Session::compiles)
      .def("stats", &stats_to_dict)
      .def("guards", &Session::guards)
      .def("ir", [](const Session& s) { return print_graph(s.compiled_graph()); });

  // A model split over N ranks (distributed/tensor_parallel.h): the Session API, with the
  // statistics and IR of rank 0 and what the split did.
  nb::class_<TensorParallelSession>(m, "TensorParallelSession")
      .def_static(
          "load",
          [](const std::string& path, const std::string& device, int size,
             const std::string& precision, int threads, bool autotune,
             std::optional<std::vector<std::string>> passes, std::optional<std::string> dump_dir) {
            RunOptions o = make_options(precision, threads, autotune, passes, dump_dir);
            Expected<std::unique_ptr<TensorParallelSession>> s = [&] {
              nb::gil_scoped_release nogil;
              auto g = import_onnx_file(path);
              if (!g) return Expected<std::unique_ptr<TensorParallelSession>>(g.status());
              return TensorParallelSession::from_graph(std::move(g).value(), device, o, size);
            }();
            return unwrap(std::move(s));
          },
          nb::arg("path"), nb::arg("device"), nb::arg("size"), nb::arg("precision") = "f32",
          nb::arg("threads") = 0, nb::arg("autotune") = false, nb::arg("passes") = nb::none(),
          nb::arg("dump_dir") = nb::none())
      .def_static(
          "load_rank",
          [](const std::string& path, const std::string& device, const CommunicatorHandle& comm,
             const std::string& precision, int threads, bool autotune,
             std::optional<std::vector<std::string>> passes, std::optional<std::string> dump_dir) {
            RunOptions o = make_options(precision, threads, autotune, passes, dump_dir);
            Expected<std::unique_ptr<Graph>> g = [&] {
              nb::gil_scoped_release nogil;
              return import_onnx_file(path);
            }();
            return rank_session_from_graph(unwrap(std::move(g)), device, o, comm);
          },
          nb::arg("path"), nb::arg("device"), nb::arg("communicator"), nb::arg("precision") = "f32",
          nb::arg("threads") = 0, nb::arg("autotune") = false, nb::arg("passes") = nb::none(),
          nb::arg("dump_dir") = nb::none(),
          "Rank communicator.rank of communicator.size; the other ranks are other processes.")
      .def("run", &run_session<TensorParallelSession>, nb::arg("names"), nb::arg("arrays"),
           nb::arg("framework"))
      .def("run_device", &run_device_session<TensorParallelSession>, nb::arg("names"),
           nb::arg("arrays"), nb::arg("alloc"), nb::arg("stream"), nb::arg("gpu") = 0,
           nb::arg("memory") = nb::none(), nb::arg("input_done") = nb::none(),
           nb::arg("memory_free") = nb::none())
      .def("time_resident", &time_resident_session<TensorParallelSession>, nb::arg("names"),
           nb::arg("arrays"), nb::arg("runs"))
      .def_prop_ro(
          "inputs",
          [](TensorParallelSession& s) { return describe_values(s.local(0).graph().inputs()); })
      .def_prop_ro(
          "outputs",
          [](TensorParallelSession& s) { return describe_values(s.local(0).graph().outputs()); })
      .def_prop_ro("device", [](TensorParallelSession& s) { return s.local(0).device().name(); })
      .def_prop_ro("compiles", [](TensorParallelSession& s) { return s.local(0).compiles(); })
      .def_prop_ro("size", &TensorParallelSession::size)
      .def_prop_ro("rank", &TensorParallelSession::first_rank)
      .def_prop_ro("collectives", &TensorParallelSession::collectives)
      .def("stats", [](TensorParallelSession& s) { return stats_to_dict(s.local(0)); })
      .def("ir", [](TensorParallelSession& s) { return print_graph(s.local(0).compiled_graph()); })
      .def("split_report", [](TensorParallelSession& s) {
        nb::dict d;
        const ShardReport& r = s.report();
        d["summary"] = r.summary();
        d["collectives"] = s.collectives();  // the library, as the first local rank's says
        d["column_parallel"] = r.column_parallel;
        d["row_parallel"] = r.row_parallel;
        d["all_gathers"] = r.all_gathers;
        d["vocab_parallel"] = r.vocab_parallel;
        d["weight_bytes_before"] = r.weight_bytes_before;
        d["weight_bytes_after"] = r.weight_bytes_after;
        d["lines"] = r.lines;
        return d;
      });
}

}  // namespace ferrite::py
