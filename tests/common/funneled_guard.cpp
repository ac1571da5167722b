#include "common/funneled_guard.hpp"

#include <mpi.h>

#include <array>
#include <atomic>
#include <mutex>
#include <thread>

namespace {

// Static initialisation runs on the main thread, before main().
const std::thread::id main_thread = std::this_thread::get_id();
std::atomic<long> calls{0};
std::mutex mutex;
std::vector<std::string> off_main;  // guarded by mutex

void note(const char* name) {
  calls.fetch_add(1, std::memory_order_relaxed);
  if (std::this_thread::get_id() == main_thread) return;
  const std::lock_guard lock(mutex);
  if (off_main.size() < 64) off_main.emplace_back(name);
}

}  // namespace

namespace accelerate::testing {

std::vector<std::string> off_main_thread_mpi_calls() {
  const std::lock_guard lock(mutex);
  return off_main;
}

void clear_off_main_thread_mpi_calls() {
  const std::lock_guard lock(mutex);
  off_main.clear();
}

long guarded_mpi_calls() { return calls.load(); }

}  // namespace accelerate::testing

// One definition per MPI function the library calls after MPI_Init.
#define ACCELERATE_GUARD(name, params, args) \
  extern "C" int name params {                \
    note(#name);                              \
    return P##name args;                      \
  }

ACCELERATE_GUARD(MPI_Comm_size, (MPI_Comm c, int* s), (c, s))
ACCELERATE_GUARD(MPI_Comm_rank, (MPI_Comm c, int* r), (c, r))
ACCELERATE_GUARD(MPI_Abort, (MPI_Comm c, int e), (c, e))
ACCELERATE_GUARD(MPI_Error_string, (int e, char* s, int* n), (e, s, n))
ACCELERATE_GUARD(MPI_Error_class, (int e, int* c), (e, c))
ACCELERATE_GUARD(MPI_Test, (MPI_Request* q, int* f, MPI_Status* s), (q, f, s))
ACCELERATE_GUARD(MPI_Cancel, (MPI_Request* q), (q))
ACCELERATE_GUARD(MPI_Request_free, (MPI_Request* q), (q))
ACCELERATE_GUARD(MPI_Iprobe, (int src, int tag, MPI_Comm c, int* f, MPI_Status* s), (src, tag, c, f, s))
ACCELERATE_GUARD(MPI_Isend, (const void* b, int n, MPI_Datatype t, int d, int tag, MPI_Comm c, MPI_Request* q),
                 (b, n, t, d, tag, c, q))
ACCELERATE_GUARD(MPI_Irecv, (void* b, int n, MPI_Datatype t, int s, int tag, MPI_Comm c, MPI_Request* q),
                 (b, n, t, s, tag, c, q))
ACCELERATE_GUARD(MPI_Recv, (void* b, int n, MPI_Datatype t, int s, int tag, MPI_Comm c, MPI_Status* st),
                 (b, n, t, s, tag, c, st))
ACCELERATE_GUARD(MPI_Bcast, (void* b, int n, MPI_Datatype t, int r, MPI_Comm c), (b, n, t, r, c))
ACCELERATE_GUARD(MPI_Allreduce, (const void* s, void* r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c),
                 (s, r, n, t, o, c))
ACCELERATE_GUARD(MPI_Ibarrier, (MPI_Comm c, MPI_Request* q), (c, q))
ACCELERATE_GUARD(MPI_Ibcast, (void* b, int n, MPI_Datatype t, int r, MPI_Comm c, MPI_Request* q), (b, n, t, r, c, q))
ACCELERATE_GUARD(MPI_Iallreduce,
                 (const void* s, void* r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c, MPI_Request* q),
                 (s, r, n, t, o, c, q))
ACCELERATE_GUARD(MPI_Iallgather,
                 (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c,
                  MPI_Request* q),
                 (s, sn, st, r, rn, rt, c, q))
ACCELERATE_GUARD(MPI_Iallgatherv,
                 (const void* s, int sn, MPI_Datatype st, void* r, const int* rn, const int* d, MPI_Datatype rt,
                  MPI_Comm c, MPI_Request* q),
                 (s, sn, st, r, rn, d, rt, c, q))
ACCELERATE_GUARD(MPI_Igather,
                 (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c,
                  MPI_Request* q),
                 (s, sn, st, r, rn, rt, root, c, q))
ACCELERATE_GUARD(MPI_Igatherv,
                 (const void* s, int sn, MPI_Datatype st, void* r, const int* rn, const int* d, MPI_Datatype rt,
                  int root, MPI_Comm c, MPI_Request* q),
                 (s, sn, st, r, rn, d, rt, root, c, q))
ACCELERATE_GUARD(MPI_Iscatter,
                 (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c,
                  MPI_Request* q),
                 (s, sn, st, r, rn, rt, root, c, q))
ACCELERATE_GUARD(MPI_Ialltoall,
                 (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c,
                  MPI_Request* q),
                 (s, sn, st, r, rn, rt, c, q))
ACCELERATE_GUARD(MPI_Ireduce_scatter_block,
                 (const void* s, void* r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c, MPI_Request* q),
                 (s, r, n, t, o, c, q))
ACCELERATE_GUARD(MPI_Comm_dup, (MPI_Comm c, MPI_Comm* n), (c, n))
ACCELERATE_GUARD(MPI_Comm_split, (MPI_Comm c, int color, int key, MPI_Comm* n), (c, color, key, n))
ACCELERATE_GUARD(MPI_Comm_split_type, (MPI_Comm c, int type, int key, MPI_Info i, MPI_Comm* n), (c, type, key, i, n))
ACCELERATE_GUARD(MPI_Comm_free, (MPI_Comm* c), (c))
ACCELERATE_GUARD(MPI_Comm_set_errhandler, (MPI_Comm c, MPI_Errhandler e), (c, e))
ACCELERATE_GUARD(MPI_Comm_set_attr, (MPI_Comm c, int k, void* v), (c, k, v))
ACCELERATE_GUARD(MPI_Comm_get_attr, (MPI_Comm c, int k, void* v, int* f), (c, k, v, f))
ACCELERATE_GUARD(MPI_Comm_delete_attr, (MPI_Comm c, int k), (c, k))
ACCELERATE_GUARD(MPI_Comm_create_keyval,
                 (MPI_Comm_copy_attr_function * copy, MPI_Comm_delete_attr_function* del, int* k, void* extra),
                 (copy, del, k, extra))
ACCELERATE_GUARD(MPI_Op_create, (MPI_User_function * f, int commute, MPI_Op* o), (f, commute, o))
ACCELERATE_GUARD(MPI_Op_free, (MPI_Op * o), (o))
ACCELERATE_GUARD(MPI_Type_contiguous, (int n, MPI_Datatype t, MPI_Datatype* nt), (n, t, nt))
ACCELERATE_GUARD(MPI_Type_create_hindexed,
                 (int n, const int* lengths, const MPI_Aint* displacements, MPI_Datatype t, MPI_Datatype* nt),
                 (n, lengths, displacements, t, nt))
ACCELERATE_GUARD(MPI_Type_commit, (MPI_Datatype * t), (t))
ACCELERATE_GUARD(MPI_Type_free, (MPI_Datatype * t), (t))
ACCELERATE_GUARD(MPI_Type_size, (MPI_Datatype t, int* s), (t, s))
ACCELERATE_GUARD(MPI_Get_address, (const void* p, MPI_Aint* a), (p, a))
