#ifndef GB_COMMON_VERSION_H
#define GB_COMMON_VERSION_H
#define GB_VERSION "0.1.0"
#endif
