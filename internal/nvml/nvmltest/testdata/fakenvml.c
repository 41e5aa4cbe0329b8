/*
 * A stand-in libnvidia-ml.so.1 for tests on machines without a GPU. It is
 * compiled against NVIDIA's own nvml.h (the copy go-nvml ships), so every
 * function here has the driver's exact prototype and struct layout; the
 * values are ours. Two simulated GPUs: index i answers with values derived
 * from i so a binding that mixes up devices or fields is caught.
 *
 * FAKENVML_FAIL_INIT=<code> makes nvmlInit_v2 return that code.
 * FAKENVML_PROCS=<n> gives GPU 1 n compute processes (to exercise the
 * INSUFFICIENT_SIZE retry).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include "nvml.h"

#define NDEV 2
struct nvmlDevice_st { int index; };
static struct nvmlDevice_st devs[NDEV] = {{0}, {1}};
static int inits;

/* go-nvml's copy of nvml.h wraps the handle pointer in a one-member struct
 * (for cgo); it is passed exactly like NVIDIA's bare pointer. */
static int idx(nvmlDevice_t d) {
    if (d.handle != &devs[0] && d.handle != &devs[1]) return -1;
    return d.handle->index;
}
#define DEV(d) int i = idx(d); if (i < 0) return NVML_ERROR_INVALID_ARGUMENT

nvmlReturn_t nvmlInit_v2(void) {
    const char *f = getenv("FAKENVML_FAIL_INIT");
    if (f && *f) return (nvmlReturn_t)atoi(f);
    inits++;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return nvmlInit_v2(); }
nvmlReturn_t nvmlShutdown(void) {
    if (inits == 0) return NVML_ERROR_UNINITIALIZED;
    inits--;
    return NVML_SUCCESS;
}
const char *nvmlErrorString(nvmlReturn_t r) { return r == NVML_SUCCESS ? "Success" : "fake error"; }

nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int n) {
    snprintf(v, n, "%s", "580.65.06");
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { *v = 13000; return NVML_SUCCESS; }
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 13000; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) { *n = NDEV; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
    if (i >= NDEV) return NVML_ERROR_INVALID_ARGUMENT;
    d->handle = &devs[i];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p) {
    DEV(d);
    memset(p, 0, sizeof *p);
    p->domain = 9 * i;
    p->bus = 0x01 + 0x10 * i;
    p->device = 0;
    p->pciDeviceId = 0x234210DE;
    p->pciSubSystemId = 0x16CB10DE;
    snprintf(p->busId, sizeof p->busId, "%08X:%02X:00.0", p->domain, p->bus);
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "%04X:%02X:00.0", p->domain, p->bus);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, nvmlPciInfo_t *p) { return nvmlDeviceGetPciInfo_v3(d, p); }
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int n) {
    DEV(d);
    snprintf(name, n, "NVIDIA GH200 480GB (fake %d)", i);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int n) {
    DEV(d);
    snprintf(uuid, n, "GPU-fa4e0000-0000-0000-0000-00000000000%d", i);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    DEV(d);
    m->total = 102005473280ULL;
    m->used = (unsigned long long)(i + 1) << 30;
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *maj, int *mnr) {
    DEV(d);
    *maj = 9; *mnr = i;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, nvmlEnableState_t *s) {
    DEV(d);
    *s = i == 0 ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pend) {
    DEV(d);
    *cur = 0; *pend = (unsigned int)i;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, nvmlEnableState_t *s) {
    DEV(d);
    if (link >= 18) return NVML_ERROR_INVALID_ARGUMENT;
    *s = link < (unsigned)(18 - 2 * i) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t d, unsigned int link, unsigned int *v) {
    DEV(d);
    if (link >= 18) return NVML_ERROR_INVALID_ARGUMENT;
    *v = 4;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) { DEV(d); *v = 5; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) { DEV(d); *v = 1 + i; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned int *v) { DEV(d); *v = 16; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int *v) { DEV(d); *v = 8 >> i; return NVML_SUCCESS; }
/* GH200-like: GPU i's memory is NUMA node 1+8i, its nearest host node is i. */
nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t d, unsigned int *node) { DEV(d); *node = 1 + 8 * i; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t d, unsigned int size, unsigned long *set, nvmlAffinityScope_t scope) {
    DEV(d);
    if (size == 0 || set == NULL || scope != NVML_AFFINITY_SCOPE_NODE) return NVML_ERROR_INVALID_ARGUMENT;
    memset(set, 0, size * sizeof *set);
    set[0] = 1UL << i;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_t *infos) {
    DEV(d);
    unsigned int n = 0;
    if (i == 1) {
        const char *p = getenv("FAKENVML_PROCS");
        n = p ? (unsigned)atoi(p) : 2;
    }
    if (*count < n) { *count = n; return NVML_ERROR_INSUFFICIENT_SIZE; }
    for (unsigned int k = 0; k < n; k++) {
        infos[k].pid = 4000 + k;
        infos[k].usedGpuMemory = (unsigned long long)(k + 1) << 28;
        infos[k].gpuInstanceId = 0xFFFFFFFF;
        infos[k].computeInstanceId = 0xFFFFFFFF;
    }
    *count = n;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, nvmlGpuTopologyLevel_t *l) {
    if (idx(a) < 0 || idx(b) < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *l = a.handle == b.handle ? NVML_TOPOLOGY_INTERNAL : NVML_TOPOLOGY_SYSTEM;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, nvmlGpuP2PCapsIndex_t c, nvmlGpuP2PStatus_t *s) {
    if (idx(a) < 0 || idx(b) < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *s = c == NVML_P2P_CAPS_INDEX_WRITE ? NVML_P2P_STATUS_DISABLED_BY_REGKEY : NVML_P2P_STATUS_OK;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    DEV(d);
    u->gpu = 100 - 37 * i; u->memory = 3 + i;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw) { DEV(d); *mw = 95000 + 1000 * i; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw) { DEV(d); *mw = 900000; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t t, unsigned int *mhz) {
    DEV(d);
    if (t != NVML_CLOCK_SM) return NVML_ERROR_NOT_SUPPORTED;
    *mhz = 1980 - 10 * i;
    return NVML_SUCCESS;
}
