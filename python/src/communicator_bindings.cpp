// ferrite._core.Communicator: the communicator a tensor-parallel rank of one process runs its
// collectives through (ops/communicator.h), made from Python. Two kinds:
//   - over a Python object (ferrite.distributed's torch.distributed process group): each
//     collective calls back into Python on torch tensors over ferrite's buffers (no copies);
//   - a device's own collectives library across processes (NCCL on cuda), bootstrapped from an
//     id that rank 0 made and the launcher handed to every rank (Device::communicator_rank).
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>

#include <memory>

#include "bindings.h"
#include "tensor_interop.h"

namespace ferrite::py {

namespace {

// Collectives through `impl.all_reduce(inp, out)`, `impl.all_gather(inp, out)` and
// `impl.reduce_scatter(inp, out)` on 1-D torch tensors over ferrite's memory, valid only during
// the call. The run that reaches a collective has released the GIL (run_session); the call takes
// it back. A Python exception becomes the collective's error: the run fails with it, the
// process goes on.
class PythonCommunicator : public Communicator {
 public:
  PythonCommunicator(nb::object impl, int rank, int size, std::string name)
      : impl_(std::move(impl)), rank_(rank), size_(size), name_(std::move(name)) {}
  ~PythonCommunicator() override {
    // The object is Python's: released with the GIL, or leaked when the interpreter is gone.
    if (Py_IsInitialized()) {
      nb::gil_scoped_acquire gil;
      impl_.reset();
    } else {
      impl_.release();
    }
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return str_cat(name_, " rank ", rank_, " of ", size_); }
  Status all_reduce_sum(const void* in, void* out, int64_t count, DType dtype) override {
    return call("all_reduce", "AllReduce", in, count, out, count, dtype);
  }
  Status all_gather(const void* in, void* out, int64_t count, DType dtype) override {
    return call("all_gather", "AllGather", in, count, out, count * size_, dtype);
  }
  Status reduce_scatter_sum(const void* in, void* out, int64_t count, DType dtype) override {
    return call("reduce_scatter", "ReduceScatter", in, count * size_, out, count, dtype);
  }
  // The other ranks are other processes: nothing here can wake them. They fail when their
  // process group does (its timeout, or the launcher tearing the job down).
  void abort(const std::string&) override {}

 private:
  static nb::object view(const void* p, int64_t count, DType dtype) {
    size_t shape[1] = {static_cast<size_t>(count)};
    // No owner (the buffer is ferrite's and outlives the call) and rv_policy::reference:
    // nanobind's default policy would hand Python a copy of an array without an owner, and the
    // collective's result would land in the copy.
    return nb::ndarray<nb::pytorch>(const_cast<void*>(p), 1, shape, nb::handle(), nullptr,
                                    dlpack_from_dtype(dtype))
        .cast(nb::rv_policy::reference);
  }

  Status call(const char* method, const char* what, const void* in, int64_t in_count, void* out,
              int64_t out_count, DType dtype) const {
    const std::string where =
        str_cat(describe(), ": ", what, " of ", in_count, " ", dtype_name(dtype));
    nb::gil_scoped_acquire gil;
    try {
      impl_.attr(method)(view(in, in_count, dtype), view(out, out_count, dtype));
      return Status::ok();
    } catch (nb::python_error& e) {
      std::string type = nb::cast<std::string>(nb::handle(e.type()).attr("__name__"));
      std::string msg = nb::cast<std::string>(nb::str(e.value()));
      return err(where, " failed in Python: ", type, ": ", msg);
    } catch (const std::exception& e) {
      return err(where, " failed: ", e.what());
    }
  }

  nb::object impl_;
  int rank_, size_;
  std::string name_;
};

}  // namespace

void bind_communicator(nb::module_& m) {
  nb::class_<CommunicatorHandle>(m, "Communicator")
      .def_static(
          "from_python",
          [](nb::object impl, int rank, int size, const std::string& name) {
            if (size < 1 || rank < 0 || rank >= size)
              throw nb::value_error(("rank " + std::to_string(rank) + " of " +
                                     std::to_string(size) + " is not a rank of a group")
                                        .c_str());
            for (const char* m : {"all_reduce", "all_gather", "reduce_scatter"})
              if (!nb::hasattr(impl, m))
                throw nb::type_error(
                    (std::string("a communicator object needs a method '") + m + "'").c_str());
            return CommunicatorHandle{
                std::make_shared<PythonCommunicator>(std::move(impl), rank, size, name)};
          },
          nb::arg("impl"), nb::arg("rank"), nb::arg("size"), nb::arg("name") = "python",
          "Collectives through impl.all_reduce / all_gather / reduce_scatter (inp, out), called "
          "with 1-D torch tensors over ferrite's buffers, valid only during the call.")
      .def_static(
          "device_id",
          [](const std::string& device) {
            Expected<std::string> id = [&]() -> Expected<std::string> {
              nb::gil_scoped_release nogil;
              FERRITE_ASSIGN_OR_RETURN(auto d, DeviceRegistry::global().create(device));
              return d->communicator_id();
            }();
            std::string bytes = unwrap(std::move(id));
            return nb::bytes(bytes.data(), bytes.size());
          },
          nb::arg("device"),
          "A new group id of the device's collectives library (rank 0 makes it; NCCL on cuda).")
      .def_static(
          "from_device",
          [](const std::string& device, nb::bytes id, int rank, int size) {
            std::string bytes(id.c_str(), id.size());
            Expected<std::unique_ptr<Communicator>> c =
                [&]() -> Expected<std::unique_ptr<Communicator>> {
              nb::gil_scoped_release nogil;
              FERRITE_ASSIGN_OR_RETURN(auto d, DeviceRegistry::global().create(device));
              return d->communicator_rank(bytes, rank, size);
            }();
            return CommunicatorHandle{std::shared_ptr<Communicator>(unwrap(std::move(c)))};
          },
          nb::arg("device"), nb::arg("id"), nb::arg("rank"), nb::arg("size"),
          "Joins the group of `id` as `rank` of `size` on `device` (every rank calls it; NCCL "
          "blocks until all have).")
      .def_prop_ro("rank", [](const CommunicatorHandle& h) { return h.c->rank(); })
      .def_prop_ro("size", [](const CommunicatorHandle& h) { return h.c->size(); })
      .def("describe", [](const CommunicatorHandle& h) { return h.c->describe(); });
}

}  // namespace ferrite::py
