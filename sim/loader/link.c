/*
 * link.c - the JIT linker (cuLinkCreate_v2, cuLinkAddData_v2,
 * cuLinkAddFile_v2, cuLinkComplete, cuLinkDestroy) and the CU_JIT_* options
 * that it shares with cuModuleLoadDataEx and cuLibraryLoadData.
 *
 * Divided into: JIT options and logs; reading one input (PTX, cubin,
 * fatbin, host object, archive); writing the linked cubin; the entry points.
 *
 * A link state gathers the kernels and variables of its inputs, each input
 * read by image.c as cuModuleLoadData reads it (so an input built for
 * another architecture is refused as a load would refuse it).  A kernel
 * defined by two inputs is an error; a variable defined twice is kept once
 * (the first), as weak definitions are.  References between inputs are not
 * resolved: simgpu runs no device code, and the driver resolves some
 * (vprintf, malloc) itself.  cuLinkComplete writes an ELF cubin for the
 * device's architecture that image.c reads back: each kernel with its
 * parameter layout, registers and frame size, each variable with its
 * initial bytes.  The image belongs to the state and goes with it.
 *
 * Logs: the buffers given to cuLinkCreate_v2 (CU_JIT_INFO_LOG_BUFFER,
 * CU_JIT_ERROR_LOG_BUFFER) receive messages over the state's life, always
 * NUL-terminated and truncated to their size; the size options and
 * CU_JIT_WALL_TIME are written back into cuLinkCreate_v2's optionValues,
 * which the driver requires to stay valid while the state lives.
 *
 * Lock: sim_p.lock guards the state's handle and contents; inputs are read
 * into a module of their own before the lock is taken.
 */
#include "loader.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


/* ---- JIT options and logs ------------------------------------------------------ */

CUresult sim_jit_parse(sim_jit_t *j, unsigned n, CUjit_option *opts, void **vals)
{
    memset(j, 0, sizeof *j);
    j->size_at[0] = j->size_at[1] = j->wall_at = -1;
    if (n && (!opts || !vals))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++)
        if ((unsigned)opts[i] >= CU_JIT_NUM_OPTIONS)
            return CUDA_ERROR_INVALID_VALUE;
    j->vals = vals;
    for (unsigned i = 0; i < n; i++) {
        switch (opts[i]) {
        case CU_JIT_INFO_LOG_BUFFER:
        case CU_JIT_ERROR_LOG_BUFFER:
            j->log[opts[i] == CU_JIT_ERROR_LOG_BUFFER] = vals[i];
            break;
        case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
        case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: {
            int e = opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
            j->cap[e] = (unsigned)(uintptr_t)vals[i];
            j->size_at[e] = (int)i;
            break;
        }
        case CU_JIT_WALL_TIME:
            j->wall_at = (int)i;
            break;
        case CU_JIT_LOG_VERBOSE:
            j->verbose = vals[i] != NULL;
            break;
        case CU_JIT_TARGET:
            j->target = (int)(uintptr_t)vals[i];
            break;
        default:                        /* compiler settings: nothing to compile */
            break;
        }
    }
    for (int e = 0; e < 2; e++) {
        if (!j->log[e])
            j->cap[e] = 0;
        if (j->cap[e])
            j->log[e][0] = '\0';
    }
    sim_jit_done(j, 0);
    return CUDA_SUCCESS;
}

void sim_jit_log(sim_jit_t *j, int error, const char *fmt, ...)
{
    if (!j->cap[error] || j->used[error] + 1 >= j->cap[error])
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(j->log[error] + j->used[error], j->cap[error] - j->used[error], fmt, ap);
    va_end(ap);
    if (w > 0)
        j->used[error] = sim_min(j->used[error] + (size_t)w, (size_t)j->cap[error] - 1);
    sim_jit_done(j, -1);
}

void sim_jit_done(sim_jit_t *j, float ms)
{
    for (int e = 0; e < 2; e++)         /* OUT: bytes of the log filled */
        if (j->size_at[e] >= 0)
            j->vals[j->size_at[e]] = (void *)(uintptr_t)j->used[e];
    if (j->wall_at >= 0 && ms >= 0) {
        j->vals[j->wall_at] = NULL;
        memcpy(&j->vals[j->wall_at], &ms, sizeof ms);
    }
}

/* ---- reading one input --------------------------------------------------------- */

/* The fatbin in a host object: .nv_fatbin, or __nv_relfatbin (nvcc -dc). */
static CUresult object_parse(const unsigned char *img, size_t len, sim_module_t *m)
{
    CUresult rc = CUDA_ERROR_INVALID_IMAGE;
    char *copy = malloc(len);           /* libelf may write into its image */
    if (!copy)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(copy, img, len);
    elf_version(EV_CURRENT);
    Elf *e = elf_memory(copy, len);
    size_t shstrndx;
    if (!e || elf_kind(e) != ELF_K_ELF || elf_getshdrstrndx(e, &shstrndx) != 0)
        goto out;
    rc = CUDA_ERROR_NO_BINARY_FOR_GPU;  /* an object without device code */
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        const char *name;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
            !(name = elf_strptr(e, shstrndx, sh.sh_name)) ||
            (strcmp(name, ".nv_fatbin") && strcmp(name, "__nv_relfatbin")))
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (d && d->d_buf && d->d_size >= 16)
            rc = sim_image_load(d->d_buf, d->d_size, m);
        break;
    }
out:
    if (e)
        elf_end(e);
    free(copy);
    return rc;
}

/* An ar archive of host objects: each member with device code. */
static CUresult library_parse(const unsigned char *img, size_t len, sim_module_t *m)
{
    if (len < 8 || memcmp(img, "!<arch>\n", 8))
        return CUDA_ERROR_INVALID_IMAGE;
    int found = 0;
    for (size_t off = 8; off + 60 <= len;) {
        const unsigned char *h = img + off;
        char size_txt[11];
        memcpy(size_txt, h + 48, 10);
        size_txt[10] = '\0';
        char *end;
        unsigned long size = strtoul(size_txt, &end, 10);
        if (memcmp(h + 58, "`\n", 2) || end == size_txt || size > len - off - 60)
            return CUDA_ERROR_INVALID_IMAGE;
        const unsigned char *body = h + 60;
        /* Members are named "name/" or, when long, "/<offset>" into the
         * "//" table: any ELF body is an object, whatever its name. */
        if (size >= 4 && !memcmp(body, ELFMAG, SELFMAG)) {
            CUresult rc = object_parse(body, size, m);
            if (rc == CUDA_SUCCESS)
                found = 1;
            else if (rc != CUDA_ERROR_NO_BINARY_FOR_GPU)
                return rc;
        }
        off += 60 + size + (size & 1);
    }
    return found ? CUDA_SUCCESS : CUDA_ERROR_NO_BINARY_FOR_GPU;
}

static int is_ptx_text(const char *t)
{
    while (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r')
        t++;
    return *t == '.' || *t == '/';
}

/* Read data of the given type into m.  PTX is read up to its NUL, as the
 * driver requires one (size may or may not count it). */
static CUresult input_parse(CUjitInputType type, const void *data, size_t size, sim_module_t *m)
{
    const unsigned char *p = data;
    uint32_t magic = 0;
    if (size >= 4)
        memcpy(&magic, p, 4);
    switch (type) {
    case CU_JIT_INPUT_PTX: {
        if (!is_ptx_text(data))
            return CUDA_ERROR_INVALID_PTX;
        CUresult rc = sim_image_load(data, 0, m);
        return rc == CUDA_ERROR_INVALID_IMAGE ? CUDA_ERROR_INVALID_PTX : rc;
    }
    case CU_JIT_INPUT_CUBIN:
        if (size < 4 || memcmp(p, ELFMAG, SELFMAG))
            return CUDA_ERROR_INVALID_IMAGE;
        return sim_image_load(data, size, m);
    case CU_JIT_INPUT_FATBINARY:
        if (magic != SIM_FATBIN_MAGIC && magic != SIM_FATBIN_WRAPPER_MAGIC)
            return CUDA_ERROR_INVALID_IMAGE;
        return sim_image_load(data, size, m);
    case CU_JIT_INPUT_OBJECT:
        if (size < 4 || memcmp(p, ELFMAG, SELFMAG))
            return CUDA_ERROR_INVALID_IMAGE;
        return object_parse(p, size, m);
    case CU_JIT_INPUT_LIBRARY:
        return library_parse(p, size, m);
    default:                            /* NVVM (LTO IR): no LTO here */
        sim_note("the JIT linker does not read LTO IR (CU_JIT_INPUT_NVVM); "
                 "link PTX or cubins");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* ---- writing the linked cubin ---------------------------------------------------- */

typedef struct buf {
    unsigned char *p;
    size_t len, cap;
    int oom;
} buf_t;

static size_t put(buf_t *b, const void *data, size_t n)
{
    size_t at = b->len;
    if (b->len + n > b->cap) {
        size_t cap = sim_max(b->cap * 2, b->len + n + 256);
        unsigned char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return at;
        }
        b->p = np;
        b->cap = cap;
    }
    if (data)
        memcpy(b->p + b->len, data, n);
    else
        memset(b->p + b->len, 0, n);
    b->len += n;
    return at;
}

static uint32_t put_str(buf_t *b, const char *prefix, const char *s)
{
    uint32_t at = (uint32_t)put(b, prefix, strlen(prefix));
    put(b, s, strlen(s) + 1);
    return at;
}

static void put_attr(buf_t *b, unsigned fmt, unsigned attr, uint16_t h, const void *v)
{
    unsigned char rec[4] = { (unsigned char)fmt, (unsigned char)attr };
    memcpy(rec + 2, &h, 2);
    put(b, rec, 4);
    if (fmt == SIM_EIFMT_SVAL)
        put(b, v, h);
}

typedef struct out_scn {
    uint32_t name, type;
    uint64_t flags;
    buf_t data;                         /* NOBITS: only data.len counts */
    uint32_t link, info;
    uint64_t align, entsize;
} out_scn_t;

static out_scn_t *scn_add(out_scn_t *s, int *n, buf_t *shstr, const char *prefix,
                          const char *name, uint32_t type)
{
    out_scn_t *o = &s[(*n)++];
    memset(o, 0, sizeof *o);
    o->name = put_str(shstr, prefix, name);
    o->type = type;
    o->align = 4;
    return o;
}

/* The ELF cubin of m for sm_<arch>: sections .shstrtab, .strtab, .symtab,
 * .nv.info, .nv.global, .nv.global.init, then per kernel .text.<k>,
 * .nv.info.<k>, .nv.shared.<k>, .nv.constant0.<k>.  Symbols: the variables,
 * then the kernels (index 1 + nglobals + i). */
static CUresult cubin_write(const sim_module_t *m, int arch, unsigned char **out, size_t *len)
{
    int nscn = 0, max = 7 + 4 * m->nfuncs;
    out_scn_t *s = calloc((size_t)max, sizeof *s);
    buf_t shstr = { 0 }, str = { 0 }, img = { 0 };
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (!s)
        return rc;
    put(&shstr, "", 1);
    put(&str, "", 1);
    scn_add(s, &nscn, &shstr, "", "", SHT_NULL);
    int shstr_i = nscn, str_i = nscn + 1, sym_i = nscn + 2;
    scn_add(s, &nscn, &shstr, "", ".shstrtab", SHT_STRTAB)->align = 1;
    scn_add(s, &nscn, &shstr, "", ".strtab", SHT_STRTAB)->align = 1;
    out_scn_t *sym = scn_add(s, &nscn, &shstr, "", ".symtab", SHT_SYMTAB);
    sym->link = (uint32_t)str_i;
    sym->info = 1;                      /* the null symbol is the only local */
    sym->entsize = sizeof(Elf64_Sym);
    sym->align = 8;
    out_scn_t *info = scn_add(s, &nscn, &shstr, "", ".nv.info", SIM_SHT_CUDA_INFO);
    info->link = (uint32_t)sym_i;
    int gz = nscn, gi = nscn + 1;
    scn_add(s, &nscn, &shstr, "", ".nv.global", SHT_NOBITS)->flags = SHF_ALLOC | SHF_WRITE;
    scn_add(s, &nscn, &shstr, "", ".nv.global.init", SHT_PROGBITS)->flags = SHF_ALLOC | SHF_WRITE;
    Elf64_Sym zero = { 0 };
    put(&sym->data, &zero, sizeof zero);
    for (int i = 0; i < m->nglobals; i++) {
        const sim_global_t *g = &m->globals[i];
        out_scn_t *at = &s[g->init ? gi : gz];
        at->data.len = sim_round_up(at->data.len, 8);
        Elf64_Sym y = { .st_name = put_str(&str, "", g->name),
                        .st_info = GELF_ST_INFO(STB_GLOBAL, STT_OBJECT),
                        .st_shndx = (uint16_t)(g->init ? gi : gz),
                        .st_value = at->data.len, .st_size = g->size };
        if (g->init)
            put(&at->data, g->init, g->size);
        else
            at->data.len += g->size;
        put(&sym->data, &y, sizeof y);
    }
    for (int i = 0; i < m->nfuncs; i++) {
        const sim_func_t *f = m->funcs[i];
        int text = nscn;
        out_scn_t *t = scn_add(s, &nscn, &shstr, ".text.", f->name, SHT_PROGBITS);
        t->flags = SHF_ALLOC | SHF_EXECINSTR;
        t->info = (uint32_t)(1 + m->nglobals + i);
        Elf64_Sym y = { .st_name = put_str(&str, "", f->name),
                        .st_info = GELF_ST_INFO(STB_GLOBAL, STT_FUNC),
                        .st_other = SIM_STO_CUDA_ENTRY, .st_shndx = (uint16_t)text };
        put(&sym->data, &y, sizeof y);
        out_scn_t *ki = scn_add(s, &nscn, &shstr, ".nv.info.", f->name, SIM_SHT_CUDA_INFO);
        ki->link = (uint32_t)sym_i;
        ki->info = (uint32_t)text;
        for (int p = 0; p < f->nparams; p++) {
            unsigned char v[12] = { 0 };
            uint16_t ord = (uint16_t)p, off = (uint16_t)f->params[p].offset;
            uint32_t flags = (f->params[p].size & 0x3fffu) << 18;
            memcpy(v + 4, &ord, 2);
            memcpy(v + 6, &off, 2);
            memcpy(v + 8, &flags, 4);
            put_attr(&ki->data, SIM_EIFMT_SVAL, SIM_EIATTR_KPARAM_INFO, 12, v);
        }
        put_attr(&ki->data, SIM_EIFMT_HVAL, SIM_EIATTR_CBANK_PARAM_SIZE, (uint16_t)f->param_bytes, NULL);
        uint32_t rv[2] = { (uint32_t)(1 + m->nglobals + i), (uint32_t)f->num_regs };
        put_attr(&info->data, SIM_EIFMT_SVAL, SIM_EIATTR_REGCOUNT, 8, rv);
        rv[1] = f->local_bytes;
        put_attr(&info->data, SIM_EIFMT_SVAL, SIM_EIATTR_FRAME_SIZE, 8, rv);
        if (f->shared_bytes)
            scn_add(s, &nscn, &shstr, ".nv.shared.", f->name, SHT_NOBITS)->data.len =
                f->shared_bytes;
        if (f->const_bytes)
            scn_add(s, &nscn, &shstr, ".nv.constant0.", f->name, SHT_NOBITS)->data.len =
                f->const_bytes;
    }
    s[shstr_i].data = shstr;
    s[str_i].data = str;
    shstr.p = str.p = NULL;
    int oom = 0;
    for (int i = 0; i < nscn; i++)
        oom |= s[i].data.oom;
    if (oom)
        goto out;
    /* The image: header, section contents, section headers. */
    Elf64_Ehdr eh = { .e_type = ET_EXEC, .e_machine = EM_CUDA, .e_version = EV_CURRENT,
                      .e_flags = (uint32_t)arch << 8, .e_ehsize = sizeof eh,
                      .e_shentsize = sizeof(Elf64_Shdr), .e_shnum = (uint16_t)nscn,
                      .e_shstrndx = (uint16_t)shstr_i };
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_ident[EI_OSABI] = 0x41;        /* CUDA */
    eh.e_ident[EI_ABIVERSION] = 8;      /* the architecture in e_flags bits 8-15 */
    put(&img, NULL, sizeof eh);
    uint64_t *offsets = calloc((size_t)nscn, sizeof *offsets);
    if (!offsets)
        goto out;
    for (int i = 1; i < nscn; i++) {
        put(&img, NULL, sim_round_up(img.len, 8) - img.len);
        offsets[i] = img.len;
        if (s[i].type != SHT_NOBITS)
            put(&img, s[i].data.p, s[i].data.len);
    }
    put(&img, NULL, sim_round_up(img.len, 8) - img.len);
    eh.e_shoff = img.len;
    for (int i = 0; i < nscn; i++) {
        Elf64_Shdr sh = { .sh_name = s[i].name, .sh_type = s[i].type, .sh_flags = s[i].flags,
                          .sh_offset = offsets[i], .sh_size = i ? s[i].data.len : 0,
                          .sh_link = s[i].link, .sh_info = s[i].info,
                          .sh_addralign = i ? s[i].align : 0, .sh_entsize = s[i].entsize };
        put(&img, &sh, sizeof sh);
    }
    free(offsets);
    if (img.oom)
        goto out;
    memcpy(img.p, &eh, sizeof eh);
    *out = img.p;
    *len = img.len;
    img.p = NULL;
    rc = CUDA_SUCCESS;
out:
    for (int i = 0; i < nscn; i++)
        free(s[i].data.p);
    free(shstr.p);
    free(str.p);
    free(img.p);
    free(s);
    return rc;
}

/* ---- the entry points -------------------------------------------------------------- */

typedef struct sim_link {
    uint64_t handle;
    int arch;                           /* of the output: CU_JIT_TARGET or the device's */
    sim_jit_t jit;
    uint64_t t0;                        /* for CU_JIT_WALL_TIME */
    int ninputs;
    sim_module_t out;                   /* what the inputs defined */
    unsigned char *image;               /* after cuLinkComplete */
} sim_link_t;

static void link_free(sim_link_t *l)
{
    for (int i = 0; i < l->out.nfuncs; i++)
        sim_func_free(l->out.funcs[i]);
    free(l->out.funcs);
    for (int i = 0; i < l->out.nglobals; i++) {
        free(l->out.globals[i].name);
        free(l->out.globals[i].init);
    }
    free(l->out.globals);
    if (l->handle)
        sim_obj_free(l->handle);
    free(l->image);
    free(l);
}

CUresult CUDAAPI cuLinkCreate_v2(unsigned int n, CUjit_option *opts, void **vals,
                                 CUlinkState *out)
{
    SIM_CHECK_INIT();
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    sim_link_t *l = calloc(1, sizeof *l);
    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = sim_jit_parse(&l->jit, n, opts, vals);
    if (rc != CUDA_SUCCESS) {
        free(l);
        return rc;
    }
    SIM_LOCK();
    sim_ctx_t *ctx;
    if ((rc = sim_ctx_require(&ctx)) != CUDA_SUCCESS)
        goto out_fail;
    l->arch = l->jit.target ? l->jit.target : SIM_ARCH;
    if (l->arch > SIM_ARCH || l->arch < 30) {
        sim_jit_log(&l->jit, 1, "error   : target sm_%d is not this device's (sm_%d)\n",
                    l->arch, SIM_ARCH);
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out_fail;
    }
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (!(l->handle = sim_obj_new(SIM_K_LINK, l)))
        goto out_fail;
    l->t0 = sim_now();
    *out = (CUlinkState)(uintptr_t)l->handle;
    SIM_UNLOCK();
    return CUDA_SUCCESS;
out_fail:
    link_free(l);
    SIM_UNLOCK();
    return rc;
}

/* Move what input m defines into l (under lock); a kernel defined twice is
 * an error, a variable defined twice is kept once. */
static CUresult link_merge(sim_link_t *l, sim_module_t *m, const char *name)
{
    for (int i = 0; i < m->nfuncs; i++)
        for (int k = 0; k < l->out.nfuncs; k++)
            if (!strcmp(m->funcs[i]->name, l->out.funcs[k]->name)) {
                sim_jit_log(&l->jit, 1, "error   : Multiple definition of '%s' in '%s'\n",
                            m->funcs[i]->name, name);
                return CUDA_ERROR_INVALID_IMAGE;
            }
    sim_func_t **nf = realloc(l->out.funcs, (size_t)(l->out.nfuncs + m->nfuncs + 1) * sizeof *nf);
    sim_global_t *ng = realloc(l->out.globals,
                               (size_t)(l->out.nglobals + m->nglobals + 1) * sizeof *ng);
    if (nf)
        l->out.funcs = nf;
    if (ng)
        l->out.globals = ng;
    if (!nf || !ng)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < m->nfuncs; i++) {
        if (l->jit.verbose)
            sim_jit_log(&l->jit, 0, "info    : Function properties for '%s' from '%s': "
                        "%u bytes of parameters, %d registers\n", m->funcs[i]->name, name,
                        m->funcs[i]->param_bytes, m->funcs[i]->num_regs);
        l->out.funcs[l->out.nfuncs++] = m->funcs[i];
    }
    m->nfuncs = 0;
    for (int i = 0; i < m->nglobals; i++) {
        int dup = 0;
        for (int k = 0; k < l->out.nglobals && !dup; k++)
            dup = !strcmp(m->globals[i].name, l->out.globals[k].name);
        if (dup) {
            free(m->globals[i].name);
            free(m->globals[i].init);
        } else {
            l->out.globals[l->out.nglobals++] = m->globals[i];
        }
    }
    m->nglobals = 0;
    return CUDA_SUCCESS;
}

static const char *input_kind(CUjitInputType type)
{
    static const char *const kinds[] = { "cubin", "PTX", "fatbin", "object", "library", "NVVM" };
    return (unsigned)type < sizeof kinds / sizeof kinds[0] ? kinds[type] : "input";
}

static CUresult add_data(CUlinkState state, CUjitInputType type, const void *data, size_t size,
                         const char *name, unsigned n, CUjit_option *opts, void **vals)
{
    SIM_CHECK_INIT();
    sim_jit_t own;
    if (!data || (unsigned)type >= CU_JIT_NUM_INPUT_TYPES ||
        (type != CU_JIT_INPUT_PTX && !size) || size > SIM_IMAGE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = sim_jit_parse(&own, n, opts, vals);
    if (rc != CUDA_SUCCESS)
        return rc;
    SIM_LOCK();
    sim_link_t *l = sim_obj_get((uint64_t)(uintptr_t)state, SIM_K_LINK);
    SIM_UNLOCK();
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_module_t *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = input_parse(type, data, size, m);
    if (!name)
        name = input_kind(type);
    SIM_LOCK();
    if (sim_obj_get((uint64_t)(uintptr_t)state, SIM_K_LINK) != l) {
        rc = CUDA_ERROR_INVALID_HANDLE; /* destroyed meanwhile */
    } else if (rc != CUDA_SUCCESS) {
        const char *what = NULL;
        cuGetErrorName(rc, &what);
        sim_jit_log(&l->jit, 1, "error   : %s (%s): %s\n", name, input_kind(type), what);
        sim_jit_log(&own, 1, "error   : %s (%s): %s\n", name, input_kind(type), what);
    } else if ((rc = link_merge(l, m, name)) == CUDA_SUCCESS) {
        l->ninputs++;
    }
    SIM_UNLOCK();
    sim_module_free(m);
    return rc;
}

CUresult CUDAAPI cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                                  const char *name, unsigned int n, CUjit_option *opts,
                                  void **vals)
{
    return add_data(state, type, data, size, name, n, opts, vals);
}

CUresult CUDAAPI cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
                                  unsigned int n, CUjit_option *opts, void **vals)
{
    SIM_CHECK_INIT();
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT ? CUDA_ERROR_FILE_NOT_FOUND : CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    struct stat st;
    char *buf = NULL;
    if (fstat(fileno(f), &st) < 0 || st.st_size <= 0 || (uint64_t)st.st_size > SIM_IMAGE_MAX)
        goto out;
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (!(buf = malloc((size_t)st.st_size + 1)))
        goto out;
    rc = CUDA_ERROR_FILE_NOT_FOUND;
    if (fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        goto out;
    buf[st.st_size] = '\0';             /* PTX text ends there */
    const char *base = strrchr(path, '/');
    rc = add_data(state, type, buf, (size_t)st.st_size, base ? base + 1 : path, n, opts, vals);
out:
    free(buf);
    fclose(f);
    return rc;
}

CUresult CUDAAPI cuLinkComplete(CUlinkState state, void **cubin, size_t *size)
{
    SIM_CHECK_INIT();
    if (!cubin)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_link_t *l = sim_obj_get((uint64_t)(uintptr_t)state, SIM_K_LINK);
    CUresult rc = CUDA_ERROR_INVALID_HANDLE;
    if (!l)
        goto out;
    rc = CUDA_ERROR_INVALID_VALUE;
    if (!l->ninputs) {
        sim_jit_log(&l->jit, 1, "error   : no input to link\n");
        goto out;
    }
    unsigned char *img;
    size_t len;
    if ((rc = cubin_write(&l->out, l->arch, &img, &len)) != CUDA_SUCCESS)
        goto out;
    free(l->image);
    l->image = img;
    if (l->jit.verbose)
        sim_jit_log(&l->jit, 0, "info    : %d kernels, %d variables linked for 'sm_%d'\n",
                    l->out.nfuncs, l->out.nglobals, l->arch);
    sim_jit_done(&l->jit, (float)(sim_now() - l->t0) / 1e6f);
    *cubin = img;
    if (size)
        *size = len;
out:
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuLinkDestroy(CUlinkState state)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_link_t *l = sim_obj_get((uint64_t)(uintptr_t)state, SIM_K_LINK);
    if (l)
        link_free(l);
    SIM_UNLOCK();
    return l ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
