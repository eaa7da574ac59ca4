"""Which edition of the kit this is. The course's own checkout says "course"; the
student release rewrites this line to "student", and its command line then offers the
student's commands only."""

EDITION = "course"
