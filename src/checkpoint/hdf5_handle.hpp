// Move-only owners of HDF5 identifiers: one template, one alias per kind of
// object, each closing with its own H5?close. Destructors close silently
// (they may run during unwinding); close() closes with a check, for the file,
// whose close is where buffered metadata reaches the disk.
#pragma once

#include <hdf5.h>

#include <string_view>
#include <utility>

#include "detail/hdf5_check.hpp"

namespace accelerate::checkpoint::detail {

using CloseFunction = herr_t (*)(hid_t);

template <CloseFunction Close>
class Hdf5Handle {
 public:
  Hdf5Handle() noexcept = default;
  /// Takes ownership of `id`; throws Hdf5Error when `id` is invalid.
  Hdf5Handle(hid_t id, std::string_view what) : id_(ACCELERATE_HDF5_CHECK(id, what)) {}
  ~Hdf5Handle() { reset(); }
  Hdf5Handle(Hdf5Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  Hdf5Handle& operator=(Hdf5Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  Hdf5Handle(const Hdf5Handle&) = delete;
  Hdf5Handle& operator=(const Hdf5Handle&) = delete;

  [[nodiscard]] hid_t get() const noexcept { return id_; }
  [[nodiscard]] bool valid() const noexcept { return id_ >= 0; }

  void reset() noexcept {
    if (id_ >= 0) Close(std::exchange(id_, H5I_INVALID_HID));
  }
  /// Gives the identifier up without closing it: for a parallel file whose
  /// communicator was abandoned after a timeout, whose close is a collective
  /// that would never return (unique_comm.hpp states the rule).
  void release() noexcept { id_ = H5I_INVALID_HID; }
  /// Closes now and reports a failure as Hdf5Error naming `what`.
  void close(std::string_view what) {
    if (id_ >= 0) ACCELERATE_HDF5_CHECK(Close(std::exchange(id_, H5I_INVALID_HID)), what);
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

using File = Hdf5Handle<H5Fclose>;
using Group = Hdf5Handle<H5Gclose>;
using Dataset = Hdf5Handle<H5Dclose>;
using Dataspace = Hdf5Handle<H5Sclose>;
using PropertyList = Hdf5Handle<H5Pclose>;
using Datatype = Hdf5Handle<H5Tclose>;
using Attribute = Hdf5Handle<H5Aclose>;
using Object = Hdf5Handle<H5Oclose>;

}  // namespace accelerate::checkpoint::detail
