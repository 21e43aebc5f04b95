/* The durations of the progress lines' ETAs: M:SS under an hour, H:MM:SS from an hour, whole seconds
 * rounded, "?" for a time that is not one. */
#include "../check_run.h"
#include <math.h>

#include "base/log.h"

static const char *dur(double s)
{
    static char buf[32];
    return log_duration(s, buf, sizeof buf);
}

START_TEST(duration_minutes)
{
    ck_assert_str_eq(dur(0), "0:00");
    ck_assert_str_eq(dur(0.4), "0:00");
    ck_assert_str_eq(dur(59.4), "0:59");
    ck_assert_str_eq(dur(59.6), "1:00");
    ck_assert_str_eq(dur(61), "1:01");
    ck_assert_str_eq(dur(754), "12:34");
    ck_assert_str_eq(dur(3599), "59:59");
}
END_TEST

START_TEST(duration_hours)
{
    ck_assert_str_eq(dur(3600), "1:00:00");
    ck_assert_str_eq(dur(3661), "1:01:01");
    ck_assert_str_eq(dur(45296), "12:34:56");
    ck_assert_str_eq(dur(90000), "25:00:00");
}
END_TEST

START_TEST(duration_not_a_time)
{
    ck_assert_str_eq(dur(-1), "?");
    ck_assert_str_eq(dur(NAN), "?");
    ck_assert_str_eq(dur(INFINITY), "?");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("duration");
    tcase_add_test(tc, duration_minutes);
    tcase_add_test(tc, duration_hours);
    tcase_add_test(tc, duration_not_a_time);
    suite_add_tcase(s, tc);
    return check_run(s);
}
