/* The TT-Fabric read/write API of spec section 3, for programs that act as a worker on one
 * core of one chip of a running ttemu system (started with `ttemu launch`).
 *
 * Addresses are in chip memory: an offset into the chip's L1 (all cores' L1, Tensix cores
 * first), or TT_FABRIC_DRAM | offset for DRAM. A worker writes its source data into its own
 * chip's memory (tt_fabric_memory) and the router pulls it from there (the pull model).
 * Calls return TT_FABRIC_OK or a negative error, and fill *status; on an error nothing is
 * sent and nothing is written anywhere. A status that lives in chip memory is filled in by
 * the router, which also reports the FVC it chose when fvc is -1. */
#ifndef TT_FABRIC_H
#define TT_FABRIC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tt_fabric tt_fabric;

typedef struct {
  int32_t status; /* TT_FABRIC_OK or an error below */
  int32_t fvc;    /* the FVC used (chosen by the fabric when -1 was asked), -1 if unknown yet */
} tt_fabric_status;

typedef struct {
  uint16_t mesh;
  uint16_t device;
} tt_fabric_device;

enum {
  TT_FABRIC_OK = 0,
  TT_FABRIC_EDEVICE = -1,   /* no such device in the system */
  TT_FABRIC_EADDR = -2,     /* address range outside the L1 or DRAM it names */
  TT_FABRIC_ESIZE = -3,     /* size 0, or larger than TT_FABRIC_MAX_SIZE */
  TT_FABRIC_ETXN = -4,      /* transaction id outside 0-15 */
  TT_FABRIC_EFVC = -5,      /* no such FVC (use -1 for automatic) */
  TT_FABRIC_EPLANE = -6,    /* no such routing plane */
  TT_FABRIC_ETIMEDOUT = -7, /* a barrier, or a blocking call waiting for a slot, passed its limit */
  TT_FABRIC_EARG = -8,      /* a handle that is not open (NULL, closed) or another impossible argument */
  TT_FABRIC_EAGAIN = -9,    /* non-blocking worker: the command buffer is full, nothing was sent; try again */
  TT_FABRIC_ECHIPDOWN = -10, /* this worker's own chip is not running (its process died) */
  TT_FABRIC_ENACKED = -11,  /* retry mode: writes of the transaction were still NACKed after every retry */
  /* Sockets (below). */
  TT_FABRIC_EEPOCH = -12,      /* connect: the receiver is open for this socket id in another epoch (still waiting) */
  TT_FABRIC_ENOENDPOINT = -13, /* no such socket: a handle this worker does not hold, or none at the far end */
  TT_FABRIC_ENOCREDITS = -14,  /* non-blocking send, end to end: every byte the consumer has room for is already queued; try again */
  TT_FABRIC_ECLOSED = -15,     /* the socket was closed (by the peer, or here) */
  TT_FABRIC_ELOST = -16,       /* the fabric dropped the stream's data (a NACK, or a gap): the stream is broken */
  TT_FABRIC_ESOCKETOPEN = -17, /* socket open error: no free endpoint, or a socket type not available */
  TT_FABRIC_ENOPERM = -18,     /* the socket handle belongs to another worker (core) of this chip */
  /* Memory protection (below). */
  TT_FABRIC_ENOWINDOW = -19,   /* mr_register: the chip's table of memory windows is full */
};

/* One answer from the fabric to this worker: `packets` packets of transaction `transaction_id`
 * acknowledged, NACKed (dropped by the fabric, or refused by the remote center), or answered
 * with read data. */
enum { TT_FABRIC_ACKED = 6, TT_FABRIC_NACKED = 7, TT_FABRIC_READ_DONE = 3 };
/* Why a NACK came: 0 (dropped: TTL, timeout, no route, link down, outside memory), or refused
 * for its memory key (wrong key, outside the window, a right the window lacks, no key in
 * protected memory). */
enum { TT_FABRIC_NACK_PERMISSION = 1 };
typedef struct {
  uint8_t transaction_id;
  uint8_t kind;    /* TT_FABRIC_ACKED, TT_FABRIC_NACKED or TT_FABRIC_READ_DONE */
  uint16_t reason; /* a NACK's: TT_FABRIC_NACK_PERMISSION, or 0; 0 for the others */
  uint32_t packets;
} tt_fabric_completion;

#define TT_FABRIC_DRAM (1ull << 63)
#define TT_FABRIC_MAX_SIZE (1u << 20)

/* Opens a worker on core `core` of chip MxDy of the job (NULL: $TTEMU_JOB, else the only
 * running job). On failure returns NULL and puts a one-line reason in error. */
tt_fabric* tt_fabric_open(const char* job, uint16_t mesh, uint16_t device, uint16_t core,
                          char* error, size_t error_len);
/* Frees the worker. The handle is dead afterwards: calls with it fail with TT_FABRIC_EARG (or
 * return NULL / 0), closing it again does nothing. Not safe while another thread uses it. */
void tt_fabric_close(tt_fabric* f);

/* This chip's memory at addr, or NULL when [addr, addr+size) is outside it. */
void* tt_fabric_memory(tt_fabric* f, uint64_t addr, size_t size);
/* Where this worker's own core L1 starts (an L1 address). */
uint64_t tt_fabric_core_l1(tt_fabric* f);
uint64_t tt_fabric_core_l1_size(tt_fabric* f);
/* Non-blocking mode (on != 0): the calls below never wait for a slot in the chip's command
 * buffer; when it is full they send nothing and return TT_FABRIC_EAGAIN. Barriers still wait;
 * tt_fabric_pending and tt_fabric_poll_completions never do. Off by default. */
int tt_fabric_set_nonblocking(tt_fabric* f, int on);
/* Moves up to max completions, oldest first, into out; returns how many (0 if none), or
 * TT_FABRIC_EARG. The queue holds 256; past that, answers still count down their transactions
 * but are not queued (tt_fabric_completions_lost counts them). */
int tt_fabric_poll_completions(tt_fabric* f, tt_fabric_completion* out, int max);
uint32_t tt_fabric_completions_lost(tt_fabric* f);
/* Packets of the transaction not answered yet (0: a barrier would return at once); negative
 * on a bad handle or transaction id. */
int64_t tt_fabric_pending(tt_fabric* f, uint8_t transaction_id);
/* The devices of the system: fills up to max entries, returns how many there are. */
int tt_fabric_devices(tt_fabric* f, tt_fabric_device* out, int max);
/* A device's row and column in its mesh; TT_FABRIC_OK or TT_FABRIC_EDEVICE. */
int tt_fabric_device_position(tt_fabric* f, tt_fabric_device d, int* row, int* col);
/* Data FVCs of the system (FVC numbers 0 .. n-1; the control FVC is not for workers). */
int tt_fabric_data_fvcs(tt_fabric* f);
/* Packets of this worker that the fabric dropped (TTL expiry, timeout) or refused, and NACKed. */
uint32_t tt_fabric_nacks(tt_fabric* f);
/* Of those, the packets a remote center refused for their memory key (TT_FABRIC_NACK_PERMISSION). */
uint32_t tt_fabric_permission_nacks(tt_fabric* f);
/* Retry mode (opt-in; rounds 0 turns it off). The library keeps the writes of each transaction
 * until its barrier. When the barrier finds that some of them were NACKed (a link or chip
 * failed on their way) or lost (see tt_fabric_lost), it writes the whole transaction again
 * (waiting for slots, even on a non-blocking worker) over new routes, at most `rounds` times:
 * each round waits up to wait_ms for the control plane to load new routing tables (the first
 * writes again without them, a later one that waited in vain gives up), then up to wait_ms
 * until every running chip of this host holds them. Writes are idempotent while their source
 * data stays as it was, which the caller keeps until the barrier returns. The barrier then
 * returns TT_FABRIC_OK if the last round had no NACK, else TT_FABRIC_ENACKED (writes to a chip
 * that died stay NACKed). Reads and atomics are not retried (an atomic is not idempotent). */
int tt_fabric_set_retry(tt_fabric* f, int rounds, uint32_t wait_ms);
/* Writes the retry mode issued again so far. */
uint64_t tt_fabric_retried(tt_fabric* f);
/* Packets retry mode took as lost: unanswered for wait_ms after new tables were loaded (they
 * were inside a chip that died, where no router is left to NACK them), and written again. */
uint64_t tt_fabric_lost(tt_fabric* f);
const char* tt_fabric_strerror(int code);

/* Memory protection (the UET seed's memory regions, libfabric's FI_MR_OFFSET). A worker
 * registers windows of its own chip's memory; a remote worker names one by its key, and its
 * writes, reads and atomics then address offsets into the window. The remote chip's center
 * refuses a keyed request whose key is unknown, whose range leaves the window, or that needs
 * a right the window lacks (an atomic needs write); in a system launched with
 * `--memory protected` it also refuses every request without a key. A refused request
 * changes nothing and is NACKed with TT_FABRIC_NACK_PERMISSION. Sockets are not checked. */
#define TT_FABRIC_REMOTE_READ 1u
#define TT_FABRIC_REMOTE_WRITE 2u
/* Registers [addr, addr+size) of this worker's chip memory with access (TT_FABRIC_REMOTE_*)
 * and puts its key (never 0) in *key: TT_FABRIC_EARG (access 0 or unknown bits, key NULL),
 * TT_FABRIC_ESIZE (size 0), TT_FABRIC_EADDR (outside the chip), TT_FABRIC_ENOWINDOW (1024 per chip). */
int tt_fabric_mr_register(tt_fabric* f, uint64_t addr, uint64_t size, uint32_t access, uint64_t* key);
/* Removes a window of this worker's core: remote requests naming it are refused from now on;
 * TT_FABRIC_EARG for a key no window of this core holds. tt_fabric_close removes the handle's. */
int tt_fabric_mr_deregister(tt_fabric* f, uint64_t key);
/* The key this worker's subsequent writes, reads and atomics name (0: none, the default). With
 * a key, their remote address (dst_addr, a read's src_addr) is an offset into that window, which
 * the remote center checks; multicasts carry no key. */
int tt_fabric_set_key(tt_fabric* f, uint64_t key);

int fabric_async_write(tt_fabric* f, uint8_t routing_plane, uint64_t src_addr, tt_fabric_device dst,
                       uint64_t dst_addr, uint32_t size, int fvc, uint8_t transaction_id,
                       tt_fabric_status* status);
/* Writes to every device within the given hops of origin (east, west, north, south), in the
 * origin's mesh (spec 3.2): one packet travels to the origin, and the routers copy it on to
 * the rest, one hop each. mcast_flags TT_FABRIC_MCAST_NOC: dst_addr is an offset written in
 * every Tensix core's L1 of every device of the group. The barrier of the transaction returns
 * once every device committed it. */
#define TT_FABRIC_MCAST_NOC 1u
int fabric_async_write_multicast(tt_fabric* f, uint8_t routing_plane, tt_fabric_device origin,
                                 uint8_t e_depth, uint8_t w_depth, uint8_t n_depth, uint8_t s_depth,
                                 uint64_t src_addr, uint64_t dst_addr, uint32_t size, int fvc,
                                 uint8_t transaction_id, uint32_t mcast_flags,
                                 tt_fabric_status* status);
/* Returns once every write with this transaction id has been committed at its destination, or
 * dropped by the fabric (TTL, timeout, link down) and NACKed (tt_fabric_nacks counts those);
 * TT_FABRIC_ECHIPDOWN if this worker's chip died meanwhile (found within 100 ms). */
int fabric_async_write_barrier(tt_fabric* f, uint8_t transaction_id);
int fabric_async_read(tt_fabric* f, uint8_t routing_plane, tt_fabric_device src, uint64_t src_addr,
                      uint64_t return_addr, uint32_t size, int fvc, uint8_t transaction_id,
                      tt_fabric_status* status);
int fabric_async_read_barrier(tt_fabric* f, uint8_t transaction_id);
int fabric_async_atomic_inc(tt_fabric* f, uint8_t routing_plane, tt_fabric_device dst, uint64_t dst_addr,
                            uint32_t inc_value, uint8_t wrap_boundary, int fvc, uint8_t transaction_id,
                            tt_fabric_status* status);
int fabric_async_atomic_read_inc(tt_fabric* f, uint8_t routing_plane, uint64_t return_addr,
                                 tt_fabric_device dst, uint64_t dst_addr, uint32_t inc_value,
                                 uint8_t wrap_boundary, int fvc, uint8_t transaction_id,
                                 tt_fabric_status* status);

/* Sockets (spec 2.4.2-2.4.4, section 4). Sender and receiver each open a socket with the same
 * socket id, epoch and type; the session is active once both have (fabric_socket_connect).
 * A receiver ready for one epoch connects only with the sender of that epoch; senders of other
 * epochs wait (their connect says TT_FABRIC_EEPOCH when it gives up). Data arrives in the
 * receiving worker's L1 circular buffer (L1CB), in order; with end-to-end handshake (the
 * default) a DRAM spill buffer (DSCB) takes what L1CB has no room for, and the sender never
 * sends more than the receiver can hold, so a stalled receiver blocks no other traffic; with
 * local handshake a full receiver backs its data up into the fabric (spec 2.4.4).
 * A datagram socket (TT_FABRIC_DSOCKET) shares its FVC with other traffic. A streaming socket
 * (TT_FABRIC_SSOCKET) binds an FVC: its open reserves it at every router from sender to
 * receiver, where other devices' traffic on that FVC then waits until the socket closes
 * (other FVCs and other routes are untouched); connect returns once the reservation is
 * complete. FVCs 1 .. data FVCs - 1 are reservable (FVC 0 stays shared), each by one of a
 * chip's SSockets at a time: past that, open fails with TT_FABRIC_ESOCKETOPEN. A socket
 * handle is a small number >= 0; calls return TT_FABRIC_OK (or a byte count) or a negative
 * error. */
enum { TT_FABRIC_DSOCKET = 0, TT_FABRIC_SSOCKET = 1, TT_FABRIC_MULTICAST = 2 /* | TT_FABRIC_SSOCKET */ };
enum { TT_FABRIC_SEND = 0, TT_FABRIC_RECEIVE = 1 };
enum { TT_FABRIC_LOCAL_HANDSHAKE = 0, TT_FABRIC_END_TO_END = 1 };
#define TT_FABRIC_ANY 0xFFFFu /* a receiver's remote {TT_FABRIC_ANY, TT_FABRIC_ANY}: any sender */

typedef struct {
  int handshake;      /* TT_FABRIC_END_TO_END or TT_FABRIC_LOCAL_HANDSHAKE */
  uint64_t l1cb_addr; /* receiver: its L1CB in this chip's memory; size 0: a default slot of 64 KiB at the */
  uint32_t l1cb_size; /*   top of this worker's core L1 (8 such slots per worker), at least 4096 B otherwise */
  uint64_t dscb_addr; /* receiver: its DSCB; size 0 with end-to-end handshake: a default 256 KiB in DRAM */
  uint32_t dscb_size; /*   (local handshake has none unless given) */
  /* A multicast SSocket's sender (TT_FABRIC_SSOCKET | TT_FABRIC_MULTICAST): the receivers are
   * the devices within these hops (east, west, north, south) of remote_addr in its mesh, as
   * for fabric_async_write_multicast, at most 16; each opens a receiving SSocket from the
   * sender. The socket connects once all are ready; each receives the whole stream. */
  uint8_t mcast_depth[4];
} tt_fabric_socket_options;

enum {
  TT_FABRIC_SOCKET_OPENING = 2,
  TT_FABRIC_SOCKET_CONNECTED = 3,
  TT_FABRIC_SOCKET_PEER_CLOSED = 4,
  TT_FABRIC_SOCKET_CLOSED = 5,
  TT_FABRIC_SOCKET_BROKEN = 6,
};
typedef struct {
  int32_t state;      /* TT_FABRIC_SOCKET_* */
  int32_t status;     /* why it broke (or, opening, TT_FABRIC_EEPOCH); TT_FABRIC_OK otherwise */
  uint64_t readable;  /* receiver: bytes waiting in L1CB */
  uint64_t spilled;   /* receiver: bytes that went through the DSCB */
  uint32_t backed_up; /* receiver: 1 while its data waits in the fabric for room (local handshake) */
  uint32_t reserved;
  uint64_t queued;    /* sender: bytes given to fabric_socket_send */
  uint64_t sent;      /* sender: bytes the fabric has taken (their source memory may be reused) */
} tt_fabric_socket_info;

/* Opens a socket toward (send) or from (receive) `remote_addr` on the data FVC `fvc` (-1: FVC 0
 * for a DSocket, a free reservable FVC for an SSocket; the receiver's is ignored). Returns
 * the handle, or an error: TT_FABRIC_ESOCKETOPEN, TT_FABRIC_EDEVICE, TT_FABRIC_EFVC,
 * TT_FABRIC_EPLANE, TT_FABRIC_EARG (type, direction), TT_FABRIC_ESIZE / TT_FABRIC_EADDR (buffers). */
int fabric_socket_open(tt_fabric* f, uint8_t routing_plane, uint32_t epoch_id, uint32_t socket_id,
                       int socket_type, int direction, tt_fabric_device remote_addr, int fvc);
int fabric_socket_open_with(tt_fabric* f, uint8_t routing_plane, uint32_t epoch_id, uint32_t socket_id,
                            int socket_type, int direction, tt_fabric_device remote_addr, int fvc,
                            const tt_fabric_socket_options* options);
/* TT_FABRIC_OK once the session is active. Blocking: waits up to the barrier limit
 * ($TTEMU_BARRIER_TIMEOUT_MS), then TT_FABRIC_EEPOCH or TT_FABRIC_ETIMEDOUT; non-blocking:
 * TT_FABRIC_EAGAIN while it is not. The socket's error if it broke. */
int fabric_socket_connect(tt_fabric* f, int socket);
/* Sends `size` bytes at src_addr (this chip's memory). Blocking: returns once the fabric has
 * taken them all (src may then be reused). Non-blocking: returns once they are queued (or
 * TT_FABRIC_EAGAIN when the command buffer is full); tt_fabric_socket_info's `sent` says
 * when they are taken. */
int fabric_socket_send(tt_fabric* f, int socket, uint64_t src_addr, uint32_t size);
/* Moves up to max bytes that arrived into out: how many; 0 once the sender has closed and
 * everything was read. Blocking: waits for at least one byte; non-blocking: TT_FABRIC_EAGAIN
 * when none is there. */
int64_t fabric_socket_recv(tt_fabric* f, int socket, void* out, size_t max);
int fabric_socket_info(tt_fabric* f, int socket, tt_fabric_socket_info* info);
/* Closes the socket (a sender's close travels behind its data) and frees its handle; the
 * router fills *return_status when the close is done (spec 4.2). */
int fabric_socket_close(tt_fabric* f, int socket, tt_fabric_status* return_status);

#ifdef __cplusplus
}
#endif

#endif /* TT_FABRIC_H */
