/* Flame graphs: flame.h. */
#include "sample/flame.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/hash.h"

#define WIDTH    1200   /* pixels */
#define PAD      10
#define FRAME_H  16
#define TOP      64     /* title, buttons */
#define BOTTOM   34     /* details line */
#define MIN_PX   0.1    /* narrower frames are left out */
#define CHAR_PX  7.0    /* at 12px monospace-ish: for cutting labels */

enum kind { K_USER, K_KERNEL, K_JIT };

struct node {
	uint32_t name;            /* index in names */
	uint32_t parent;
	uint64_t count;
	uint32_t *kids; size_t nkids, kcap;
	uint8_t kind;
};

struct flame {
	const struct gb_profile *p;
	struct node *v; size_t n, cap;        /* v[0]: "all" */
	char **names; size_t nnames, namecap;
	uint32_t *nidx; size_t nidxcap;       /* names hash: index + 1 */
	uint32_t *edge; size_t edgecap;       /* (parent, name) hash: node + 1 */
	unsigned maxdepth;
};

/* Open addressing over a power-of-2 table of uint32 (0 empty), rebuilt at
 * half full by rehash(). */
static int grow_tab(uint32_t **t, size_t *cap, size_t used, uint64_t (*key)(const struct flame *, uint32_t),
		    const struct flame *f)
{
	if (2 * (used + 1) <= *cap)
		return 0;
	size_t ncap = *cap ? 2 * *cap : 1024;
	uint32_t *nt = calloc(ncap, sizeof(*nt));
	if (!nt)
		return -ENOMEM;
	for (size_t i = 0; i < *cap; i++)
		if ((*t)[i]) {
			size_t j = key(f, (*t)[i] - 1) & (ncap - 1);
			while (nt[j])
				j = (j + 1) & (ncap - 1);
			nt[j] = (*t)[i];
		}
	free(*t);
	*t = nt;
	*cap = ncap;
	return 0;
}

static uint64_t name_key(const struct flame *f, uint32_t i) { return gb_fnv1a_str(f->names[i]); }

static uint64_t edge_hash(uint32_t parent, uint32_t name)
{
	return ((uint64_t)parent * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)name * 0xc2b2ae3d27d4eb4full);
}

static uint64_t edge_key(const struct flame *f, uint32_t i)
{
	return edge_hash(f->v[i].parent, f->v[i].name);
}

/* The index of name (added). */
static int intern(struct flame *f, const char *name, uint32_t *out)
{
	if (grow_tab(&f->nidx, &f->nidxcap, f->nnames, name_key, f))
		return -ENOMEM;
	size_t j = gb_fnv1a_str(name) & (f->nidxcap - 1);
	for (; f->nidx[j]; j = (j + 1) & (f->nidxcap - 1))
		if (!strcmp(f->names[f->nidx[j] - 1], name)) {
			*out = f->nidx[j] - 1;
			return 0;
		}
	char *s = strdup(name);
	if (!s || GB_GROW(&f->names, &f->namecap, f->nnames + 1)) {
		free(s);
		return -ENOMEM;
	}
	f->names[f->nnames] = s;
	f->nidx[j] = (uint32_t)++f->nnames;
	*out = (uint32_t)(f->nnames - 1);
	return 0;
}

/* The child of parent named name (added). */
static int child(struct flame *f, uint32_t parent, uint32_t name, uint8_t kind, uint32_t *out)
{
	if (grow_tab(&f->edge, &f->edgecap, f->n, edge_key, f))
		return -ENOMEM;
	size_t j = edge_hash(parent, name) & (f->edgecap - 1);
	for (; f->edge[j]; j = (j + 1) & (f->edgecap - 1)) {
		const struct node *c = &f->v[f->edge[j] - 1];
		if (c->parent == parent && c->name == name) {
			*out = f->edge[j] - 1;
			return 0;
		}
	}
	if (GB_GROW(&f->v, &f->cap, f->n + 1))
		return -ENOMEM;
	struct node *p = &f->v[parent];
	if (GB_GROW(&p->kids, &p->kcap, p->nkids + 1))
		return -ENOMEM;
	uint32_t id = (uint32_t)f->n++;
	f->v[id] = (struct node){ .name = name, .parent = parent, .kind = kind };
	f->v[parent].kids[f->v[parent].nkids++] = id;
	f->edge[j] = id + 1;
	*out = id;
	return 0;
}

static uint8_t kind_of(const struct gb_profile_loc *l)
{
	if (l->kernel)
		return K_KERNEL;
	if (l->python || (l->module && !strncmp(l->module, "/tmp/perf-", 10)))
		return K_JIT;
	return K_USER;
}

static int add_stack(void *ctx, const uint64_t *ids, size_t n, pid_t pid, const char *comm,
		     uint64_t count)
{
	struct flame *f = ctx;
	char name[512];
	uint32_t at = 0, nm;
	unsigned depth = 0;
	int err = 0;

	f->v[0].count += count;
	if (gb_profile__per_process(f->p)) {
		snprintf(name, sizeof(name), "%s-%d", comm, (int)pid);
		if ((err = intern(f, name, &nm)) || (err = child(f, at, nm, K_USER, &at)))
			return err;
		f->v[at].count += count;
		depth++;
	}
	if (!n) {
		if ((err = intern(f, "[no stack]", &nm)) || (err = child(f, at, nm, K_USER, &at)))
			return err;
		f->v[at].count += count;
		depth++;
	}
	for (size_t i = n; i-- > 0;) {
		const struct gb_profile_loc *l = gb_profile__loc(f->p, ids[i]);
		gb_profile__loc_name(l, name, sizeof(name));
		if ((err = intern(f, name, &nm)) || (err = child(f, at, nm, kind_of(l), &at)))
			return err;
		f->v[at].count += count;
		depth++;
	}
	if (depth > f->maxdepth)
		f->maxdepth = depth;
	return 0;
}

static const struct flame *sort_ctx;

static int cmp_kids(const void *a, const void *b)
{
	const struct node *x = &sort_ctx->v[*(const uint32_t *)a], *y = &sort_ctx->v[*(const uint32_t *)b];
	return strcmp(sort_ctx->names[x->name], sort_ctx->names[y->name]);
}

/* XML text: & < > " ' escaped, control characters dropped. */
static void xml(FILE *o, const char *s, size_t max)
{
	for (size_t k = 0; *s; s++) {
		if (((unsigned char)*s & 0xc0) != 0x80 && k++ == max)
			break; /* (max characters: never half of one) */
		switch (*s) {
		case '&': fputs("&amp;", o); break;
		case '<': fputs("&lt;", o); break;
		case '>': fputs("&gt;", o); break;
		case '"': fputs("&quot;", o); break;
		case '\'': fputs("&apos;", o); break;
		default:
			if ((unsigned char)*s >= 0x20 && *s != 0x7f)
				fputc(*s, o);
		}
	}
}

static void color(const char *name, uint8_t kind, int rgb[3])
{
	uint64_t h = gb_fnv1a_str(name);
	double a = (double)(h & 0xffff) / 65535.0, b = (double)((h >> 16) & 0xffff) / 65535.0;
	switch (kind) {
	case K_KERNEL:
		rgb[0] = 200 + (int)(40 * a), rgb[1] = 120 + (int)(50 * b), rgb[2] = 40 + (int)(30 * a);
		break;
	case K_JIT:
		rgb[0] = 50 + (int)(60 * a), rgb[1] = 190 + (int)(50 * b), rgb[2] = 170 + (int)(60 * a);
		break;
	default: /* warm: red to yellow */
		rgb[0] = 205 + (int)(50 * b), rgb[1] = (int)(230 * a), rgb[2] = (int)(55 * b);
	}
}

static void frame(FILE *o, const struct flame *f, uint32_t id, uint64_t x, unsigned depth,
		  double px, double height)
{
	const struct node *nd = &f->v[id];
	double w = (double)nd->count * px;
	if (w < MIN_PX)
		return;
	const char *name = id ? f->names[nd->name] : "all";
	double pct = f->v[0].count ? 100.0 * (double)nd->count / (double)f->v[0].count : 0;
	double xx = PAD + (double)x * px, y = height - BOTTOM - (double)(depth + 1) * FRAME_H;
	int rgb[3];
	color(name, id ? nd->kind : K_USER, rgb);
	fprintf(o, "<g class=\"f\" data-x=\"%" PRIu64 "\" data-w=\"%" PRIu64 "\" data-d=\"%u\"><title>", x,
		nd->count, depth);
	xml(o, name, SIZE_MAX);
	fprintf(o, " (%" PRIu64 " samples, %.2f%%)</title><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
		"height=\"%d\" fill=\"rgb(%d,%d,%d)\" rx=\"2\" ry=\"2\"/><text x=\"%.1f\" y=\"%.1f\">",
		nd->count, pct, xx, y, w, FRAME_H - 1, rgb[0], rgb[1], rgb[2], xx + 3, y + 11.5);
	size_t fit = w < 3 * CHAR_PX ? 0 : (size_t)((w - 6) / CHAR_PX);
	if (fit >= strlen(name)) {
		xml(o, name, SIZE_MAX);
	} else if (fit > 2) {
		xml(o, name, fit - 2);
		fputs("..", o);
	}
	fputs("</text></g>\n", o);
	uint64_t cx = x;
	for (size_t k = 0; k < nd->nkids; k++) {
		frame(o, f, nd->kids[k], cx, depth + 1, px, height);
		cx += f->v[nd->kids[k]].count;
	}
}

/* The page's script: zoom, reset, search.  Each frame's <g> carries its
 * place in samples (data-x, data-w) and depth (data-d); its name is its
 * <title> up to the " (N samples" the title adds. */
static const char script[] =
	"var W=" "1180" ",PAD=10,CH=7,total=0,frames=[],zoomed=null;\n"
	"function nameOf(g){var t=g.querySelector('title').textContent;return t.substring(0,t.lastIndexOf(' ('));}\n"
	"function label(g,w){var n=nameOf(g),t=g.querySelector('text'),fit=w<3*CH?0:Math.floor((w-6)/CH);\n"
	" t.textContent=fit>=n.length?n:(fit>2?n.substring(0,fit-2)+'..':'');}\n"
	"function init(){frames=Array.prototype.slice.call(document.querySelectorAll('g.f'));\n"
	" frames.forEach(function(g){g.dataset.fill=g.querySelector('rect').getAttribute('fill');\n"
	"  g.addEventListener('click',function(){zoom(g);});\n"
	"  g.addEventListener('mouseover',function(){document.getElementById('details').textContent=g.querySelector('title').textContent;});\n"
	"  g.addEventListener('mouseout',function(){document.getElementById('details').textContent=' ';});\n"
	"  if(g.dataset.d==='0')total=+g.dataset.w;});\n"
	" document.getElementById('reset').addEventListener('click',reset);\n"
	" document.getElementById('search').addEventListener('click',askSearch);\n"
	" window.addEventListener('keydown',function(e){if((e.ctrlKey||e.metaKey)&&e.key==='f'){e.preventDefault();askSearch();}});\n"
	" var h=decodeURIComponent(location.hash||'');if(h.indexOf('#s=')===0)search(h.substring(3));}\n"
	"function place(g,x0,w0){var x=+g.dataset.x,w=+g.dataset.w,r=g.querySelector('rect'),t=g.querySelector('text');\n"
	" var nx=PAD+(x-x0)/w0*W,nw=w/w0*W;r.setAttribute('x',nx.toFixed(1));r.setAttribute('width',nw.toFixed(1));\n"
	" t.setAttribute('x',(nx+3).toFixed(1));label(g,nw);}\n"
	"function zoom(z){var x0=+z.dataset.x,w0=+z.dataset.w,d0=+z.dataset.d;zoomed=z;\n"
	" frames.forEach(function(g){var x=+g.dataset.x,w=+g.dataset.w,d=+g.dataset.d;\n"
	"  if(d<d0&&x<=x0&&x+w>=x0+w0){place(g,x,w);g.style.display='';g.style.opacity='0.5';}\n"
	"  else if(d>=d0&&x>=x0&&x+w<=x0+w0){place(g,x0,w0);g.style.display='';g.style.opacity='';}\n"
	"  else g.style.display='none';});\n"
	" document.getElementById('reset').style.opacity='1';}\n"
	"function reset(){zoomed=null;frames.forEach(function(g){place(g,0,total);g.style.display='';g.style.opacity='';});\n"
	" document.getElementById('reset').style.opacity='0';}\n"
	"function askSearch(){var s=prompt('Search for a function (a regular expression)','');if(s===null)return;search(s);}\n"
	"function search(s){var re;try{re=new RegExp(s);}catch(e){alert(e);return;}var hits=[];\n"
	" frames.forEach(function(g){var m=s!==''&&g.dataset.d!=='0'&&re.test(nameOf(g));\n"
	"  g.querySelector('rect').setAttribute('fill',m?'rgb(230,0,230)':g.dataset.fill);if(m)hits.push([+g.dataset.x,+g.dataset.w]);});\n"
	" hits.sort(function(a,b){return a[0]-b[0];});var sum=0,end=-1;\n"
	" hits.forEach(function(h){var s0=Math.max(h[0],end),e=h[0]+h[1];if(e>s0){sum+=e-s0;end=e;}});\n"
	" document.getElementById('matched').textContent=s===''?' ':'Matched: '+(total?(100*sum/total).toFixed(1):'0')+'%';\n"
	" return sum;}\n";

int gb_flame_write(const struct gb_profile *p, FILE *o, const char *title)
{
	struct flame f = { .p = p };
	int err = GB_GROW(&f.v, &f.cap, 1);
	if (!err) {
		f.v[0] = (struct node){ 0 };
		f.n = 1;
		err = gb_profile__each_stack(p, add_stack, &f);
	}
	if (!err) {
		sort_ctx = &f;
		for (size_t i = 0; i < f.n; i++)
			if (f.v[i].nkids > 1)
				qsort(f.v[i].kids, f.v[i].nkids, sizeof(uint32_t), cmp_kids);
		double height = TOP + BOTTOM + (double)(f.maxdepth + 1) * FRAME_H;
		double px = f.v[0].count ? (double)(WIDTH - 2 * PAD) / (double)f.v[0].count : 0;
		fprintf(o, "<?xml version=\"1.0\" standalone=\"no\"?>\n"
			"<svg version=\"1.1\" width=\"%d\" height=\"%.0f\" viewBox=\"0 0 %d %.0f\" "
			"onload=\"init()\" xmlns=\"http://www.w3.org/2000/svg\">\n"
			"<!-- a flame graph by gebpf sample (docs/sample.md, Flame graphs) -->\n"
			"<style>text{font-family:monospace;font-size:12px;fill:rgb(0,0,0)}"
			"g.f:hover rect{stroke:rgb(0,0,0);stroke-width:0.5}g.f{cursor:pointer}"
			"#reset,#search{cursor:pointer}</style>\n"
			"<script><![CDATA[\n%s]]></script>\n"
			"<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%.0f\" fill=\"rgb(250,250,238)\"/>\n"
			"<text x=\"%d\" y=\"24\" text-anchor=\"middle\" style=\"font-size:17px\">",
			WIDTH, height, WIDTH, height, script, WIDTH, height, WIDTH / 2);
		xml(o, title ? title : "Flame Graph", 300);
		fprintf(o, "</text>\n<text id=\"reset\" x=\"%d\" y=\"48\" style=\"opacity:0\">Reset Zoom</text>\n"
			"<text id=\"search\" x=\"%d\" y=\"48\" text-anchor=\"end\">Search</text>\n"
			"<text id=\"matched\" x=\"%d\" y=\"%.0f\" text-anchor=\"end\"> </text>\n"
			"<text id=\"details\" x=\"%d\" y=\"%.0f\"> </text>\n",
			PAD, WIDTH - PAD, WIDTH - PAD, height - 12, PAD, height - 12);
		if (f.v[0].count)
			frame(o, &f, 0, 0, 0, px, height);
		fputs("</svg>\n", o);
		if (fflush(o) || ferror(o))
			err = -EIO;
	}
	for (size_t i = 0; i < f.n; i++)
		free(f.v[i].kids);
	for (size_t i = 0; i < f.nnames; i++)
		free(f.names[i]);
	free(f.v);
	free(f.names);
	free(f.nidx);
	free(f.edge);
	return err;
}
