/*
 * image.c - reading device code: cubins (ELF, with libelf), PTX text, and
 * the dispatcher to them and to fatbins (fatbin.c) and their wrappers.
 *
 * Divided into: functions and their parameters; cubins; PTX; the
 * dispatcher sim_image_load().  A cubin built for an architecture the
 * device does not run is CUDA_ERROR_NO_BINARY_FOR_GPU, PTX whose target is
 * newer than the device CUDA_ERROR_INVALID_PTX.
 *
 * What simgpu needs of a kernel is its name and its parameter layout (count,
 * offset and size of each), to pack kernelParams as the device would, and a
 * few plausible attributes.  In a cubin: kernels are the STT_FUNC symbols
 * marked as entries, parameters the SIM_EIATTR_KPARAM_INFO records of section
 * .nv.info.<kernel>; registers come from SIM_EIATTR_REGCOUNT in .nv.info.  In
 * PTX: `.entry name(` and its `.param` list, laid out by PTX's rules (each
 * parameter aligned to its own alignment).  Module-scope variables (for
 * cuModuleGetGlobal): STT_OBJECT symbols of the .nv.global and user
 * .nv.constant sections of a cubin, `.global` / `.const` statements of PTX.  Garbage is
 * CUDA_ERROR_INVALID_IMAGE, never a read past what the image declares.
 *
 * No lock: works on the image and on a module not yet published.
 */
#include "loader.h"

#include <ctype.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- functions ------------------------------------------------------------ */

void sim_func_free(sim_func_t *f)
{
    if (!f)
        return;
    if (f->handle)
        sim_obj_free(f->handle);
    free(f->name);
    free(f->params);
    free(f);
}

static sim_func_t *func_add(sim_module_t *m, const char *name, size_t len)
{
    sim_func_t **nf = realloc(m->funcs, (size_t)(m->nfuncs + 1) * sizeof *nf);
    if (!nf)
        return NULL;
    m->funcs = nf;
    sim_func_t *f = calloc(1, sizeof *f);
    if (!f || !(f->name = strndup(name, len))) {
        free(f);
        return NULL;
    }
    f->mod = m;
    f->max_threads = 1024;
    f->carveout = -1;
    f->max_dyn_shared = 49152;
    m->funcs[m->nfuncs++] = f;
    return f;
}

/* Parameter i at (offset, size); grows the list. */
static int func_param(sim_func_t *f, int i, uint32_t offset, uint32_t size)
{
    if (i < 0 || i >= 4096)
        return -1;
    if (i >= f->nparams) {
        sim_param_t *np = realloc(f->params, (size_t)(i + 1) * sizeof *np);
        if (!np)
            return -1;
        memset(np + f->nparams, 0, (size_t)(i + 1 - f->nparams) * sizeof *np);
        f->params = np;
        f->nparams = i + 1;
    }
    f->params[i].offset = offset;
    f->params[i].size = size;
    if (offset + size > f->param_bytes)
        f->param_bytes = offset + size;
    return 0;
}

/* The kernels simgpu emulates, recognized by name and parameter layout. */
static void func_classify(sim_func_t *f)
{
    const sim_param_t *p = f->params;
    if (!strcmp(f->name, "salus_spin") && f->nparams >= 1 && p[0].size == 8)
        f->emu = SIM_EMU_SPIN;
    else if (!strcmp(f->name, "salus_fill") && f->nparams == 3 && p[0].size == 8 &&
             p[1].size == 4 && p[2].size == 8)
        f->emu = SIM_EMU_FILL;
    else if (!strcmp(f->name, "salus_axpy") && f->nparams == 4 && p[0].size == 8 &&
             p[1].size == 8 && p[2].size == 4 && p[3].size == 8)
        f->emu = SIM_EMU_AXPY;
}

static int global_add(sim_module_t *m, const char *name, size_t len, size_t size,
                      const void *init)
{
    sim_global_t *ng = realloc(m->globals, (size_t)(m->nglobals + 1) * sizeof *ng);
    if (!ng)
        return -1;
    m->globals = ng;
    sim_global_t *g = &ng[m->nglobals];
    memset(g, 0, sizeof *g);
    g->size = size;
    if (!(g->name = strndup(name, len)))
        return -1;
    if (init && !(g->init = malloc(size))) {
        free(g->name);
        return -1;
    }
    if (init)
        memcpy(g->init, init, size);
    m->nglobals++;
    return 0;
}

/* ---- cubins ---------------------------------------------------------------- */

/* The extent of an ELF image: its headers and every section's data. */
static size_t elf_extent(const unsigned char *img)
{
    Elf64_Ehdr eh;
    memcpy(&eh, img, sizeof eh);
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
        eh.e_shnum == 0 || eh.e_shoff > SIM_IMAGE_MAX || eh.e_shnum > 65000)
        return 0;
    size_t end = eh.e_shoff + (size_t)eh.e_shnum * sizeof(Elf64_Shdr);
    if (eh.e_phoff && eh.e_phnum) {
        if (eh.e_phoff > SIM_IMAGE_MAX || eh.e_phentsize != sizeof(Elf64_Phdr))
            return 0;
        end = sim_max(end, eh.e_phoff + (size_t)eh.e_phnum * sizeof(Elf64_Phdr));
    }
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, img + eh.e_shoff + (size_t)i * sizeof sh, sizeof sh);
        if (sh.sh_type == SHT_NOBITS)
            continue;
        if (sh.sh_offset > SIM_IMAGE_MAX || sh.sh_size > SIM_IMAGE_MAX)
            return 0;
        end = sim_max(end, sh.sh_offset + sh.sh_size);
    }
    return end;
}

static Elf_Data *section_data(Elf *e, const char *name, size_t shstrndx, GElf_Shdr *out)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh))
            continue;
        const char *n = elf_strptr(e, shstrndx, sh.sh_name);
        if (n && !strcmp(n, name)) {
            if (out)
                *out = sh;
            return elf_getdata(scn, NULL);
        }
    }
    return NULL;
}

/* Walk the records of an .nv.info section: fmt (1), attribute (1), then a
 * 16-bit value or, for SIM_EIFMT_SVAL, the size of the data that follows. */
typedef void (*info_fn)(sim_func_t *f, unsigned attr, const unsigned char *v,
                        unsigned len, uint16_t hval, void *arg);

static void info_walk(const Elf_Data *d, sim_func_t *f, info_fn fn, void *arg)
{
    const unsigned char *p = d->d_buf;
    size_t n = d->d_size, i = 0;
    while (p && i + 4 <= n) {
        unsigned fmt = p[i], attr = p[i + 1];
        uint16_t h;
        memcpy(&h, p + i + 2, 2);
        unsigned len = fmt == SIM_EIFMT_SVAL ? h : 0;
        if (i + 4 + len > n)
            break;
        fn(f, attr, p + i + 4, len, h, arg);
        i += 4 + len;
    }
}

static void kernel_info(sim_func_t *f, unsigned attr, const unsigned char *v, unsigned len,
                        uint16_t hval, void *arg)
{
    int *bad = arg;
    if (attr == SIM_EIATTR_KPARAM_INFO && len >= 12) {
        uint16_t ordinal, offset;
        uint32_t flags;
        memcpy(&ordinal, v + 4, 2);
        memcpy(&offset, v + 6, 2);
        memcpy(&flags, v + 8, 4);
        if (func_param(f, ordinal, offset, (flags >> 18) & 0x3fff))
            *bad = 1;
    } else if (attr == SIM_EIATTR_CBANK_PARAM_SIZE && len == 0) {
        if (hval > f->param_bytes)
            f->param_bytes = hval;
    }
}

typedef struct global_info_arg {
    sim_module_t *m;
    const size_t *symidx;               /* symbol index of each function */
} global_info_arg_t;

static void global_info(sim_func_t *unused, unsigned attr, const unsigned char *v,
                        unsigned len, uint16_t hval, void *arg)
{
    (void)unused;
    (void)hval;
    global_info_arg_t *g = arg;
    if ((attr != SIM_EIATTR_REGCOUNT && attr != SIM_EIATTR_FRAME_SIZE) || len < 8)
        return;
    uint32_t sym, val;
    memcpy(&sym, v, 4);
    memcpy(&val, v + 4, 4);
    for (int i = 0; i < g->m->nfuncs; i++) {
        if (g->symidx[i] != sym)
            continue;
        if (attr == SIM_EIATTR_REGCOUNT)
            g->m->funcs[i]->num_regs = (int)val;
        else
            g->m->funcs[i]->local_bytes = val;
    }
}

/* The next symbol table section after scn (NULL: the first), with its
 * header, data and entry count; NULL when there is no other. */
static Elf_Scn *next_symtab(Elf *e, Elf_Scn *scn, GElf_Shdr *sh, Elf_Data **d, size_t *n)
{
    while ((scn = elf_nextscn(e, scn))) {
        if (!gelf_getshdr(scn, sh) || sh->sh_type != SHT_SYMTAB || !sh->sh_entsize)
            continue;
        *d = elf_getdata(scn, NULL);
        *n = *d ? (*d)->d_size / sh->sh_entsize : 0;
        return scn;
    }
    return NULL;
}

/* Kernels: from the first symbol table only. */
static CUresult cubin_functions(Elf *e, sim_module_t *m, size_t **symidx)
{
    GElf_Shdr sh;
    Elf_Data *d;
    size_t n;
    if (!next_symtab(e, NULL, &sh, &d, &n))
        return CUDA_SUCCESS;            /* no symbols: a module without kernels */
    int entries = 0;
    for (int pass = 0; pass < 2 && !entries; pass++) {
        /* Kernels are flagged SIM_STO_CUDA_ENTRY; a toolchain without the
         * flag: every defined global function. */
        for (size_t i = 0; i < n; i++) {
            GElf_Sym s;
            if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
                s.st_shndx == SHN_UNDEF)
                continue;
            if (pass == 0 ? !(s.st_other & SIM_STO_CUDA_ENTRY)
                          : GELF_ST_BIND(s.st_info) == STB_LOCAL)
                continue;
            const char *name = elf_strptr(e, sh.sh_link, s.st_name);
            if (!name || !*name)
                continue;
            size_t *ni = realloc(*symidx, (size_t)(m->nfuncs + 1) * sizeof *ni);
            if (!ni)
                return CUDA_ERROR_OUT_OF_MEMORY;
            *symidx = ni;
            ni[m->nfuncs] = i;
            if (!func_add(m, name, strlen(name)))
                return CUDA_ERROR_OUT_OF_MEMORY;
            entries++;
        }
    }
    return CUDA_SUCCESS;
}

/* Variables: defined STT_OBJECT symbols of .nv.global* (zeros or their
 * initializers) and of the user constant banks (.nv.constant1..: the
 * parameters live in .nv.constant0). */
static CUresult cubin_globals(Elf *e, size_t shstrndx, sim_module_t *m)
{
    GElf_Shdr sh;
    Elf_Data *d;
    size_t n;
    for (Elf_Scn *scn = NULL; (scn = next_symtab(e, scn, &sh, &d, &n));) {
        for (size_t i = 0; i < n; i++) {
            GElf_Sym sym;
            GElf_Shdr vs;
            if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_OBJECT ||
                !sym.st_size || sym.st_size > (1u << 30) || sym.st_shndx == SHN_UNDEF ||
                sym.st_shndx >= SHN_LORESERVE)
                continue;
            Elf_Scn *vscn = elf_getscn(e, sym.st_shndx);
            const char *sec = vscn && gelf_getshdr(vscn, &vs) ? elf_strptr(e, shstrndx, vs.sh_name)
                                                               : NULL;
            const char *name = elf_strptr(e, sh.sh_link, sym.st_name);
            if (!sec || !name || !*name ||
                (strncmp(sec, ".nv.global", 10) &&
                 (strncmp(sec, ".nv.constant", 12) || !strcmp(sec, ".nv.constant0") ||
                  !strncmp(sec, ".nv.constant0.", 14))))
                continue;
            const void *init = NULL;
            Elf_Data *vd = vs.sh_type == SHT_NOBITS ? NULL : elf_getdata(vscn, NULL);
            if (vd && vd->d_buf && sym.st_value <= vd->d_size &&
                sym.st_size <= vd->d_size - sym.st_value)
                init = (const char *)vd->d_buf + sym.st_value;
            if (global_add(m, name, strlen(name), sym.st_size, init))
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    return CUDA_SUCCESS;
}

/* The architecture a cubin was built for: e_flags bits 8-15 from ELF ABI
 * version 8 (CUDA 12.8 and later), bits 0-7 before. */
static unsigned cubin_arch(const GElf_Ehdr *eh)
{
    return eh->e_ident[EI_ABIVERSION] >= 8 ? (eh->e_flags >> 8) & 0xff : eh->e_flags & 0xff;
}

CUresult sim_cubin_load(const unsigned char *img, size_t len, sim_module_t *m)
{
    if (len < sizeof(Elf64_Ehdr))
        return CUDA_ERROR_INVALID_IMAGE;
    size_t extent = elf_extent(img);
    if (!extent || extent > len)
        return CUDA_ERROR_INVALID_IMAGE;
    char *copy = malloc(extent);        /* libelf may not write into the caller's */
    if (!copy)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(copy, img, extent);
    m->image_bytes = extent;
    CUresult rc = CUDA_ERROR_INVALID_IMAGE;
    size_t *symidx = NULL, shstrndx;
    elf_version(EV_CURRENT);
    Elf *e = elf_memory(copy, extent);
    GElf_Ehdr eh;
    if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh) || eh.e_machine != EM_CUDA ||
        elf_getshdrstrndx(e, &shstrndx) != 0)
        goto out_end;
    rc = CUDA_ERROR_NO_BINARY_FOR_GPU;  /* as a real sm_90 refuses sm_80 or sm_120 code */
    if (!sim_arch_runs_cubin(cubin_arch(&eh)))
        goto out_end;
    rc = cubin_functions(e, m, &symidx);
    if (rc != CUDA_SUCCESS)
        goto out_end;
    for (int i = 0; i < m->nfuncs; i++) {
        sim_func_t *f = m->funcs[i];
        char sec[1100];
        GElf_Shdr sh;
        int bad = 0;
        snprintf(sec, sizeof sec, ".nv.info.%s", f->name);
        Elf_Data *d = section_data(e, sec, shstrndx, NULL);
        if (d)
            info_walk(d, f, kernel_info, &bad);
        if (bad) {
            rc = CUDA_ERROR_INVALID_IMAGE;
            goto out_end;
        }
        snprintf(sec, sizeof sec, ".nv.shared.%s", f->name);
        if (section_data(e, sec, shstrndx, &sh))
            f->shared_bytes = (uint32_t)sh.sh_size;
        snprintf(sec, sizeof sec, ".nv.constant0.%s", f->name);
        if (section_data(e, sec, shstrndx, &sh))
            f->const_bytes = (uint32_t)sh.sh_size;
        func_classify(f);
    }
    Elf_Data *d = section_data(e, ".nv.info", shstrndx, NULL);
    if (d) {
        global_info_arg_t g = { m, symidx };
        info_walk(d, NULL, global_info, &g);
    }
    rc = cubin_globals(e, shstrndx, m);
out_end:
    if (e)
        elf_end(e);
    free(symidx);
    free(copy);
    return rc;
}

/* ---- PTX ------------------------------------------------------------------ */

static void strip_comments(char *t)
{
    for (char *p = t; *p; p++) {
        if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n')
                *p++ = ' ';
            if (!*p)
                break;
        } else if (p[0] == '/' && p[1] == '*') {
            char *end = strstr(p + 2, "*/");
            char *stop = end ? end + 2 : p + strlen(p);
            while (p < stop)
                *p++ = ' ';
            p--;
        }
    }
}

static unsigned ptx_type_size(const char *tok, size_t len)
{
    static const struct { const char *t; unsigned size; } types[] = {
        { ".u8", 1 }, { ".s8", 1 }, { ".b8", 1 }, { ".u16", 2 }, { ".s16", 2 },
        { ".b16", 2 }, { ".f16", 2 }, { ".bf16", 2 }, { ".u32", 4 }, { ".s32", 4 },
        { ".b32", 4 }, { ".f32", 4 }, { ".f16x2", 4 }, { ".u64", 8 }, { ".s64", 8 },
        { ".b64", 8 }, { ".f64", 8 }, { ".b128", 16 },
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strlen(types[i].t) == len && !memcmp(types[i].t, tok, len))
            return types[i].size;
    return 0;
}

/* One `.param` declaration, text [p, end): its size and alignment. */
static int ptx_param(const char *p, const char *end, uint32_t *size, uint32_t *align)
{
    unsigned elem = 0, al = 0;
    unsigned long count = 1;
    int ptr = 0;
    while (p < end) {
        while (p < end && isspace((unsigned char)*p))
            p++;
        const char *tok = p;
        while (p < end && !isspace((unsigned char)*p) && *p != '[')
            p++;
        size_t len = (size_t)(p - tok);
        if (len == 6 && !memcmp(tok, ".align", 6)) {
            unsigned long a = strtoul(p, (char **)&p, 10);
            if (!elem && !ptr)          /* after .ptr it is the pointee's */
                al = (unsigned)a;
        } else if (len == 4 && !memcmp(tok, ".ptr", 4)) {
            ptr = 1;
        } else if (!elem && ptx_type_size(tok, len)) {
            elem = ptx_type_size(tok, len);
        }
        if (p < end && *p == '[') {
            count = strtoul(p + 1, (char **)&p, 10);
            while (p < end && *p != ']')
                p++;
            if (p < end)
                p++;
        }
        if (len == 0 && p < end && !isspace((unsigned char)*p))
            p++;
    }
    if (!elem || !count || count > 32768)
        return -1;
    *size = (uint32_t)(elem * count);
    *align = al ? al : elem;
    return 0;
}

static CUresult ptx_entry(sim_module_t *m, const char *p, const char **next)
{
    while (isspace((unsigned char)*p))
        p++;
    const char *name = p;
    while (isalnum((unsigned char)*p) || *p == '_' || *p == '$' || *p == '.')
        p++;
    if (p == name)
        return CUDA_ERROR_INVALID_IMAGE;
    sim_func_t *f = func_add(m, name, (size_t)(p - name));
    if (!f)
        return CUDA_ERROR_OUT_OF_MEMORY;
    while (isspace((unsigned char)*p))
        p++;
    *next = p;
    if (*p != '(')
        return CUDA_SUCCESS;            /* no parameter list */
    const char *close = strchr(p, ')');
    if (!close)
        return CUDA_ERROR_INVALID_IMAGE;
    uint32_t offset = 0;
    int i = 0;
    for (const char *q = p + 1; q < close;) {
        const char *comma = memchr(q, ',', (size_t)(close - q));
        const char *stop = comma ? comma : close;
        const char *decl = strstr(q, ".param");
        if (decl && decl < stop) {
            uint32_t size, align;
            if (ptx_param(decl + 6, stop, &size, &align) || !align || align > 4096)
                return CUDA_ERROR_INVALID_IMAGE;
            offset = (uint32_t)sim_round_up(offset, align);
            if (func_param(f, i++, offset, size))
                return CUDA_ERROR_INVALID_IMAGE;
            offset += size;
        }
        q = stop + 1;
    }
    func_classify(f);
    *next = close + 1;
    return CUDA_SUCCESS;
}

/* Blank the `.attribute(...)` of a declaration (`.managed` variables): its
 * parentheses are no parameter list. */
static void ptx_strip_attributes(char *buf)
{
    for (char *a = buf; (a = strstr(a, ".attribute"));) {
        char *close = strchr(a, ')');
        if (!close)
            return;
        memset(a, ' ', (size_t)(close + 1 - a));
    }
}

/* Module-scope `.global` / `.const` variables of PTX: each statement at
 * brace depth 0 that declares one (not `.extern`), with or without an
 * attribute such as `.attribute(.managed)`; initializers are not
 * evaluated: such variables start as zeros. */
static CUresult ptx_globals(const char *t, sim_module_t *m)
{
    int depth = 0;
    const char *stmt = t;
    for (const char *p = t; *p; p++) {
        if (*p == '{')
            depth++;
        else if (*p == '}')
            depth--, stmt = p + 1;
        if (depth != 0 || *p != ';')
            continue;
        const char *end = p, *eq = memchr(stmt, '=', (size_t)(end - stmt));
        const char *decl_end = eq ? eq : end;
        char buf[512];
        size_t len = (size_t)(decl_end - stmt);
        if (len < sizeof buf) {
            memcpy(buf, stmt, len);
            buf[len] = '\0';
            ptx_strip_attributes(buf);
        }
        if (len < sizeof buf && !strchr(buf, '(')) {
            char *space = strstr(buf, ".global ");
            if (!space)
                space = strstr(buf, ".const ");
            if (space && !strstr(buf, ".extern")) {
                /* The name: the word before any [dimension], else the last. */
                char *br = strchr(space, '[');
                char *ne = br ? br : buf + len;
                while (ne > space && isspace((unsigned char)ne[-1]))
                    ne--;
                char *nb = ne;
                while (nb > space && (isalnum((unsigned char)nb[-1]) || nb[-1] == '_' ||
                                      nb[-1] == '$'))
                    nb--;
                uint32_t size, align;
                if (nb < ne && !ptx_param(space + 7, buf + len, &size, &align) &&
                    global_add(m, nb, (size_t)(ne - nb), size, NULL))
                    return CUDA_ERROR_OUT_OF_MEMORY;
            }
        }
        stmt = p + 1;
    }
    return CUDA_SUCCESS;
}

/* The N of `.target sm_N[a|f]`, 0 if none is said. */
static unsigned ptx_target(const char *t)
{
    const char *p = strstr(t, ".target");
    if (!p)
        return 0;
    p += 7;
    while (*p == ' ' || *p == '\t')
        p++;
    return strncmp(p, "sm_", 3) ? 0 : (unsigned)strtoul(p + 3, NULL, 10);
}

CUresult sim_ptx_load(const char *text, sim_module_t *m)
{
    char *t = strdup(text);
    if (!t)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->image_bytes = strlen(text) + 1;  /* the code it stands for, as near as known */
    strip_comments(t);
    CUresult rc = CUDA_SUCCESS;
    if (!strstr(t, ".version") && !strstr(t, ".target")) {
        rc = CUDA_ERROR_INVALID_IMAGE;
        goto out_free;
    }
    if (ptx_target(t) > SIM_ARCH) {     /* ptxas: ".target is higher than the SM" */
        rc = CUDA_ERROR_INVALID_PTX;
        goto out_free;
    }
    for (const char *p = t; (p = strstr(p, ".entry"));) {
        int word = (p == t || isspace((unsigned char)p[-1])) && isspace((unsigned char)p[6]);
        if (!word) {
            p += 6;
            continue;
        }
        rc = ptx_entry(m, p + 6, &p);
        if (rc != CUDA_SUCCESS)
            break;
    }
    if (rc == CUDA_SUCCESS)
        rc = ptx_globals(t, m);
out_free:
    free(t);
    return rc;
}

/* ---- the dispatcher ---------------------------------------------------------- */

CUresult sim_image_load(const void *image, size_t len, sim_module_t *m)
{
    const unsigned char *p = image;
    uint32_t magic;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&magic, p, 4);
    if (!memcmp(p, ELFMAG, SELFMAG))
        return sim_cubin_load(p, len ? len : SIM_IMAGE_MAX, m);
    if (magic == SIM_FATBIN_MAGIC)
        return sim_fatbin_load(p, m);
    if (magic == SIM_FATBIN_WRAPPER_MAGIC) {
        const void *data;
        memcpy(&data, p + 8, sizeof data);
        if (!data)
            return CUDA_ERROR_INVALID_IMAGE;
        memcpy(&magic, data, 4);
        return magic == SIM_FATBIN_MAGIC ? sim_fatbin_load(data, m) : CUDA_ERROR_INVALID_IMAGE;
    }
    /* PTX is text that starts with a directive or a comment. */
    const char *t = image;
    size_t i = 0;
    while ((!len || i < len) && isspace((unsigned char)t[i]))
        i++;
    if ((len && i >= len) || (t[i] != '.' && t[i] != '/'))
        return CUDA_ERROR_INVALID_IMAGE;
    if (len && !memchr(t, '\0', len))
        return CUDA_ERROR_INVALID_IMAGE;
    return sim_ptx_load(t, m);
}
