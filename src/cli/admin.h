/* `openlake admin heal|info --endpoint URL`: the administrative client of an
 * erasure-coded deployment (s3/ec_object.h's /_openlake/admin/ routes). */
#ifndef OL_CLI_ADMIN_H
#define OL_CLI_ADMIN_H

/* argv[0] is "admin".  Returns the process exit code. */
int ol_admin_main(int argc, char **argv);

#endif
