// One report per error per job: the part of abort_all that lets the ranks
// raising the same error print it once, with the list of ranks.
//
// State duplicates its world communicator for error reports alone when it
// starts (MPI_Comm_dup is collective: it belongs to the watched start-up)
// and registers the duplicate process-wide. A clean end of State frees it;
// a State destroyed by an exception, or after a collective timed out, leaves
// it registered, because main()'s handler calls abort_all after the
// exception has unwound through State. Only the newest registration is used,
// and registering frees the ones such States left behind, so at most one
// communicator is ever kept past its State.
//
// At abort time a failing rank other than 0 sends its message, with its own
// rank prefix cut out, to rank 0 of that communicator and waits for rank 0's
// acknowledgement, which rank 0 sends once it has printed the message. Rank
// 0, when it reports an error itself, collects the others' messages for a
// short window, prints each distinct one once with the ranks that raised it,
// then acknowledges. Without an acknowledgement in time (rank 0 is healthy
// and waiting in a collective, stopped, or dead) a rank prints its own
// message in full, as before. Nothing waits longer than kErrorReportWindow.
#pragma once

#include <mpi.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace accelerate::detail {

/// The longest abort_all spends on the report before it aborts the job. The
/// ranks of a collectively raised error reach abort_all within milliseconds
/// of each other, so two seconds cover them with room to spare, and keep
/// the abort prompt when rank 0 never answers.
inline constexpr std::chrono::milliseconds kErrorReportWindow{2000};

/// How long rank 0 collects the others' messages before it prints what it
/// has: shorter than kErrorReportWindow, so that its acknowledgements reach
/// the ranks that started reporting together with it before they give up.
inline constexpr std::chrono::milliseconds kErrorCollectWindow{1500};

/// The report's whole window once this process gave up on a collective (a
/// peer is known to be missing, and may be rank 0): rank 0 then collects
/// nothing beyond what has already arrived, and the others wait this long
/// for its acknowledgement before printing their own message.
inline constexpr std::chrono::milliseconds kErrorReportWindowAfterTimeout{500};

/// Duplicates `comm` (collective over it) as the error-report communicator
/// of `owner` and makes it the one abort_all uses. Frees the communicators
/// that States destroyed on an error path left behind. Throws MpiError.
void open_error_report(const void* owner, MPI_Comm comm);

/// `owner` ends cleanly (MPI may be finalised next): its communicator is
/// unregistered and freed.
void close_error_report(const void* owner) noexcept;

/// `owner` ends on an error path: its communicator stays registered for
/// abort_all.
void keep_error_report(const void* owner) noexcept;

/// `message` with every "[rank r/n on host]" (or "[rank r/n]") prefix of
/// world rank `rank` of `size` replaced by kRankMark, so that the messages
/// of ranks that raised the same error compare equal.
[[nodiscard]] std::string normalise_error_message(std::string_view message, int rank, int size);

/// Stands for the rank prefix in a normalised message (a control character
/// that error messages never contain).
inline constexpr char kRankMark = '\x1e';

/// Sorted ranks as ranges: {0,1,2,3} → "0-3", {0,2,5,6,7} → "0,2,5-7".
[[nodiscard]] std::string format_rank_list(std::vector<int> ranks);

/// The report of abort_all: true when this process's message has been
/// printed (by rank 0 of the error-report communicator, or by this process
/// as rank 0), false when the caller must print it itself (no State
/// registered one, MPI is not running, a world of one, a thread that may not
/// call MPI, no acknowledgement in time, any MPI error). Returns within
/// kErrorReportWindow.
[[nodiscard]] bool report_error_once(std::string_view message) noexcept;

}  // namespace accelerate::detail
