"""ROS 2 bags (rosbag2 MCAP) in and out of the episode schema, without a ROS install.

Why a package in ``rlinf_data``: a ROS user records everything as a bag, and our learners read
episodes. Converting needs no ROS graph -- ``mcap`` reads and writes the files and
``mcap-ros2-support`` decodes / encodes CDR from the schema text a bag carries -- so it sits
beside the LeRobot export, under the robot nodes, and imports neither rclpy nor ``rlinf_ros``.
``topics``: which topic is which field; ``messages``: per message type, vectors and frames;
``read``: bag -> episodes (resampled to the control rate); ``write``: episodes -> bag;
``msgdefs``: the definitions written into a bag's schemas. Both packages install with the
``robot`` extra.
"""

from __future__ import annotations

from rlinf_data.bags.read import BagEpisodes, bag_files, bag_topics, open_bag
from rlinf_data.bags.topics import BagError, Source, TopicMap, load_topic_map
from rlinf_data.bags.write import BagSummary, write_bag

__all__ = [
    "BagEpisodes",
    "BagError",
    "BagSummary",
    "Source",
    "TopicMap",
    "bag_files",
    "bag_topics",
    "load_topic_map",
    "open_bag",
    "write_bag",
]
