/* emunodes_probe: what an MPI job sees on emulated nodes (launch/emunodes).
 * Built by emunodes_test.sh with mpicc; run with 2+ ranks.
 *
 *   emunodes_probe [--bytes N]
 *
 * Rank 0 prints one line per rank, then one line per exchange, all of the form
 * "probe key=value ...":
 *
 *   probe rank=R host=H netns=INODE local_rank=L local_size=S group=G
 *       G is the lowest world rank of R's MPI_COMM_TYPE_SHARED group.
 *   probe exchange=intra|inter peer=P bytes=N seconds_out=T seconds_in=T
 *         net_tx=.. net_rx=.. lo=..
 *       rank 0 sends N bytes to P (a rank of its group, or the first rank of
 *       another group), P acks: seconds_out; then P sends N bytes to rank 0:
 *       seconds_in. net_tx/net_rx are the growth of rank 0's network interfaces
 *       other than lo (/proc/net/dev of its namespace) over both, lo the growth
 *       of its loopback (rx + tx).
 *
 * The data are checked; a wrong byte or a missing peer exits 1.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
  unsigned long long net_rx, net_tx, lo;
} Counters;

/* Sums /proc/self/net/dev: the interfaces of this process's namespace. */
static Counters read_counters(void) {
  Counters c = {0, 0, 0};
  FILE* f = fopen("/proc/self/net/dev", "r");
  if (!f) {
    perror("emunodes_probe: /proc/self/net/dev");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  char line[512];
  while (fgets(line, sizeof line, f)) {
    char* colon = strchr(line, ':');
    if (!colon) continue; /* the two header lines */
    *colon = '\0';
    const char* name = line;
    while (*name == ' ') ++name;
    unsigned long long v[16] = {0};
    if (sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
               &v[6], &v[7], &v[8]) != 9)
      continue;
    /* field 0: rx bytes, field 8: tx bytes */
    if (strcmp(name, "lo") == 0) {
      c.lo += v[0] + v[8];
    } else {
      c.net_rx += v[0];
      c.net_tx += v[8];
    }
  }
  fclose(f);
  return c;
}

static unsigned char pattern(int rank, size_t i) { return (unsigned char)(rank * 31 + i * 7 + (i >> 12)); }

static int check(int rank, int from, const unsigned char* buf, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i)
    if (buf[i] != pattern(from, i)) {
      fprintf(stderr, "emunodes_probe: rank %d: byte %zu from rank %d is wrong\n", rank, i, from);
      return 0;
    }
  return 1;
}

/* Rank 0 sends `bytes` to peer, then peer sends `bytes` to rank 0, one
 * direction at a time; the other ranks wait. Rank 0 reports. */
static int exchange(const char* what, int rank, int peer, size_t bytes, unsigned char* send, unsigned char* recv) {
  int ok = 1;
  if (rank == 0 || rank == peer) {
    int other = rank == 0 ? peer : 0;
    for (size_t i = 0; i < bytes; ++i) send[i] = pattern(rank, i);
    memset(recv, 0, bytes);
    char a = 0, b = 0;
    /* warm-up: the TCP connection between the two is made lazily, on first use */
    MPI_Sendrecv(&a, 1, MPI_CHAR, other, 1, &b, 1, MPI_CHAR, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    Counters before = read_counters();
    /* out: rank 0 -> peer. A send completes once the data is in the local
     * socket buffer, so the peer acks after receiving it all: the time and the
     * counters then cover the whole transfer. */
    double t0 = MPI_Wtime();
    if (rank == 0) {
      MPI_Send(send, (int)bytes, MPI_BYTE, other, 2, MPI_COMM_WORLD);
      MPI_Recv(&b, 1, MPI_CHAR, other, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(recv, (int)bytes, MPI_BYTE, other, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&a, 1, MPI_CHAR, other, 3, MPI_COMM_WORLD);
      ok &= check(rank, other, recv, bytes);
    }
    double t1 = MPI_Wtime();
    /* in: peer -> rank 0, started by a go from rank 0 */
    if (rank == 0) {
      MPI_Send(&a, 1, MPI_CHAR, other, 4, MPI_COMM_WORLD);
      MPI_Recv(recv, (int)bytes, MPI_BYTE, other, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      ok &= check(rank, other, recv, bytes);
    } else {
      MPI_Recv(&b, 1, MPI_CHAR, other, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(send, (int)bytes, MPI_BYTE, other, 5, MPI_COMM_WORLD);
    }
    double t2 = MPI_Wtime();
    Counters after = read_counters();
    if (rank == 0)
      printf("probe exchange=%s peer=%d bytes=%zu seconds_out=%.6f seconds_in=%.6f net_tx=%llu net_rx=%llu lo=%llu\n",
             what, peer, bytes, t1 - t0, t2 - t1, after.net_tx - before.net_tx, after.net_rx - before.net_rx,
             after.lo - before.lo);
  }
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  return ok;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  size_t bytes = 16u << 20;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--bytes") == 0 && i + 1 < argc) {
      bytes = (size_t)strtoull(argv[++i], NULL, 10);
    } else {
      fprintf(stderr, "emunodes_probe: unknown argument '%s' (usage: emunodes_probe [--bytes N])\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (bytes == 0 || bytes > (size_t)1 << 30) {
    fprintf(stderr, "emunodes_probe: --bytes must be 1 .. 2^30\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  int local_rank = 0, local_size = 0, group = rank;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  MPI_Bcast(&group, 1, MPI_INT, 0, local);

  struct {
    int rank, local_rank, local_size, group;
    unsigned long long netns;
    char host[MPI_MAX_PROCESSOR_NAME];
  } me, *all = NULL;
  memset(&me, 0, sizeof me);
  me.rank = rank;
  me.local_rank = local_rank;
  me.local_size = local_size;
  me.group = group;
  struct stat st;
  me.netns = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0;
  int len = 0;
  MPI_Get_processor_name(me.host, &len);
  all = malloc((size_t)size * sizeof me);
  MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int r = 0; r < size; ++r)
      printf("probe rank=%d host=%s netns=%llu local_rank=%d local_size=%d group=%d\n", all[r].rank, all[r].host,
             all[r].netns, all[r].local_rank, all[r].local_size, all[r].group);
    fflush(stdout);
  }

  /* Peers of rank 0: one on its node, one on another node. */
  int intra = -1, inter = -1;
  for (int r = 1; r < size; ++r) {
    if (all[r].group == all[0].group && intra < 0) intra = r;
    if (all[r].group != all[0].group && inter < 0) inter = r;
  }
  unsigned char* send = malloc(bytes);
  unsigned char* recv = malloc(bytes);
  if (!send || !recv) {
    fprintf(stderr, "emunodes_probe: cannot allocate 2 x %zu bytes\n", bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int ok = 1;
  MPI_Barrier(MPI_COMM_WORLD);
  if (intra > 0) ok &= exchange("intra", rank, intra, bytes, send, recv);
  if (inter > 0) ok &= exchange("inter", rank, inter, bytes, send, recv);
  if (rank == 0 && inter < 0) {
    fprintf(stderr, "emunodes_probe: all ranks share one node: no exchange between nodes\n");
    ok = 0;
  }
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  free(send);
  free(recv);
  free(all);
  MPI_Comm_free(&local);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
